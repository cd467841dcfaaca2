import NIOCore
import NIOEmbedded
import NIOHTTP2
import PinproxyHTTP1NIO
import Testing

@testable import PinproxyServer

/// A connection's handlers are freed once they leave its pipeline: taken out
/// by a CONNECT's answer, or removed as the connection closes. Some of them
/// hold the layers they were built with (`PipelineLayers`, which hold them
/// back), so a handler that kept its layers after leaving would keep the
/// whole shape, and a proxy that opened a connection a second would grow by
/// kilobytes a second for as long as it ran.
@Suite("A closed connection keeps nothing")
struct ClosedConnectionTests {
    /// A handler of the pipeline, held weakly: whether it is gone yet.
    struct Watched {
        let name: String
        let isFreed: () -> Bool
    }

    /// The `type` handler in `proxy`'s pipeline now (it must be there).
    static func watch<Handler: ChannelHandler & AnyObject>(_ type: Handler.Type, in proxy: EmbeddedProxy) throws -> Watched {
        weak let handler = try proxy.channel.pipeline.syncOperations.handler(type: type)
        return Watched(name: "\(type)") { handler == nil }
    }

    static func expectFreed(_ watched: [Watched], outliving what: String) {
        for handler in watched {
            #expect(handler.isFreed(), "\(handler.name) outlived \(what)")
        }
    }

    /// Closes the app's side as a socket closes: inactive, then the
    /// handlers removed on the loop's next turn.
    static func close(_ proxy: EmbeddedProxy) throws {
        try proxy.channel.close().wait()
        proxy.channel.embeddedEventLoop.run()
    }

    @Test func theListenersHandlersAreFreedWhenTheAppLeavesWithoutARequest() throws {
        let proxy = try EmbeddedProxy()
        let watched = [try Self.watch(ConnectHandler.self, in: proxy), try Self.watch(HTTPExchangeHandler.self, in: proxy)]
        try Self.close(proxy)
        Self.expectFreed(watched, outliving: "its connection")
    }

    @Test func theListenersHandlersAreFreedOnceACONNECTsAnswerTookThemOut() throws {
        let proxy = try EmbeddedProxy()
        let watched = [try Self.watch(ConnectHandler.self, in: proxy), try Self.watch(HTTPExchangeHandler.self, in: proxy)]
        try proxy.send("CONNECT intercept.test:443 HTTP/1.1\r\nHost: intercept.test:443\r\n\r\n")
        #expect(try ConnectHandlerTests.connectAnswer(proxy).hasPrefix("HTTP/1.1 200 "))
        proxy.channel.embeddedEventLoop.run()
        #expect(proxy.channel.isActive, "the session goes on: only the listener's layers left")
        Self.expectFreed(watched, outliving: "its layers")
    }

    @Test func anInterceptedHTTP1SessionsHandlersAreFreedWhenTheAppLeaves() throws {
        let (proxy, app) = try PipelineBuilderTests.session(offering: nil)
        defer { app.finish() }
        #expect(try proxy.channel.pipeline.syncOperations.handler(type: HTTPExchangeHandler.self).interception?.host
                == "intercept.test", "the session's own exchange handler")
        let watched = [try Self.watch(HTTPExchangeHandler.self, in: proxy), try Self.watch(ResponseWriter.self, in: proxy)]
        try Self.close(proxy)
        Self.expectFreed(watched, outliving: "its connection")
    }

    @Test func anInterceptedHTTP2SessionsHandlersAreFreedWhenTheAppLeaves() throws {
        let (proxy, app) = try PipelineBuilderTests.session(offering: ["h2", "http/1.1"])
        defer { app.finish() }
        let watched = [try Self.watch(NIOHTTP2Handler.self, in: proxy), try Self.watch(HTTP2ConnectionEnd.self, in: proxy)]
        try Self.close(proxy)
        Self.expectFreed(watched, outliving: "its connection")
    }
}
