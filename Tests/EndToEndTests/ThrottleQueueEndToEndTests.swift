import Foundation
import PinproxyTestSupport
import Testing

/// `auth.throttle_queue` (docs/contract.md §4 `upstream_throttled`) through
/// the real binary against Authlib's API: while the upstream's 429 window is
/// open, two requests wait and are sent once it passed; the third is refused.
@Suite("throttle_queue end to end", .blockingWaits, .serialized)
struct ThrottleQueueEndToEndTests {
    @Test func twoRequestsWaitOutTheWindowAndTheThirdIsRefused() throws {
        let stack = try CredentialsEndToEndTests.Stack()
        _ = try stack.provider("/_control/throttle?seconds=3", post: true)
        let first = try stack.get("https://queued.authlib.test/api/limited")
        #expect(first.status == 429)
        #expect(first.headers["x-pinproxy-error"] == nil, "the upstream's own 429 goes to the app")
        let seen = try #require(try stack.provider("/_stats")["limited"] as? Int)

        // Three apps at once, each on its own thread (a thread pool as wide as the cores could run them in turn).
        let results = Results()
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<3 {
            Thread.detachNewThread {
                if let result = try? stack.get("https://queued.authlib.test/api/limited") { results.append(result) }
                done.signal()
            }
        }
        for _ in 0..<3 { done.wait() }
        let answered = results.all
        #expect(answered.map(\.status).sorted() == [200, 200, 429], "\(answered.map(\.status)) \(stack.proxy.log)")
        let refused = answered.filter { $0.status == 429 }
        #expect(refused.allSatisfy { $0.headers["x-pinproxy-error"] == "upstream_throttled" })
        #expect(try stack.provider("/_stats")["limited"] as? Int == seen + 2, "the two queued went up once the window passed; the refused one did not")
    }
}

/// Answers collected from concurrent clients.
private final class Results: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [CurlResult] = []
    func append(_ result: CurlResult) { lock.withLock { items.append(result) } }
    var all: [CurlResult] { lock.withLock { items } }
}
