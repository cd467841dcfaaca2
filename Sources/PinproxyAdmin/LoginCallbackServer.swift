import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import PinproxyPolicy
import ServiceLifecycle

/// The one-shot listener of `pinproxy spotify login` on the session's
/// `redirect_uri`: waits for the browser's redirect, hands its query to
/// `handle`, shows the browser the page `handle` made, then stops.
public enum LoginCallbackServer {
    public struct Page: Sendable {
        public var status: Int
        public var html: String
        /// False for a stray request (favicon…): keep waiting.
        public var finished: Bool

        public init(status: Int, html: String, finished: Bool = true) {
            self.status = status
            self.html = html
            self.finished = finished
        }
    }

    /// Serves until `handle` returns a finished page (or the task is cancelled).
    public static func serve(
        host: String, port: Int, path: String,
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger,
        onListening: @escaping @Sendable (HostPort) async -> Void,
        handle: @escaping @Sendable (_ query: [(String, String)]) async -> Page
    ) async throws {
        let (finished, finish) = AsyncStream<Void>.makeStream()
        let router = Router()
        router.get(RouterPath(path.isEmpty ? "/" : path)) { request, _ in
            let query = request.uri.queryParameters.map { (String($0.key), String($0.value)) }
            let page = await handle(query)
            if page.finished { finish.yield() }
            return Response(status: .init(code: page.status), headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                            body: ResponseBody(byteBuffer: ByteBuffer(string: page.html)))
        }
        let app = Application(
            router: router,
            configuration: ApplicationConfiguration(address: .hostname(host, port: port)),
            onServerRunning: { channel in
                await onListening(HostPort(host: host, port: channel.localAddress?.port ?? port))
            },
            eventLoopGroupProvider: .shared(eventLoopGroup),
            logger: logger)
        // Stopped by a graceful shutdown once the page is served: no cancellation noise.
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            tasks.addTask {
                for await _ in finished { break }
                // Let the page reach the browser before the listener goes.
                try? await Task.sleep(for: .milliseconds(200))
                await group.triggerGracefulShutdown()
            }
            // The server ends first when it failed to start: end the waiter too.
            do {
                try await tasks.next()
            } catch {
                tasks.cancelAll()
                throw error
            }
            tasks.cancelAll()
        }
    }
}
