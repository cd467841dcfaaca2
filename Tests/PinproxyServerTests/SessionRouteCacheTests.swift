import Foundation
import NIOHTTP1
import PinproxyPolicy
import PinproxyTestSupport
import Testing

@testable import PinproxyServer

/// Routing inside an intercepted session remembers the `Host` value it
/// accepted (issue 33: the route's work per request): the next request with
/// that value skips the parse, and nothing else is let through by it.
@Suite("Session route cache")
struct SessionRouteCacheTests {
    static let snapshot = PolicySnapshot.loaded(policies: """
        hosts:
          - match: api.test
            action: intercept
            headers:
              set: { X-Seen: "yes" }
        """, directory: "pinproxy-routecache")

    static func session() -> RequestRouter.Interception {
        RequestRouter.Interception(host: "api.test", port: 443, policy: snapshot.policy(forHost: "api.test")!)
    }

    static func head(_ uri: String = "/v1/me?x=1", hosts: [String] = ["api.test"]) -> HTTPRequestHead {
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: uri)
        for host in hosts { head.headers.add(name: "Host", value: host) }
        head.headers.add(name: "Accept", value: "*/*")
        return head
    }

    /// Routed as the app's HTTP/1.1 leg hands it on: as its bytes.
    static func route(_ head: HTTPRequestHead, in session: RequestRouter.Interception) -> RoutingDecision {
        RequestRouter.route(AppRequestHead.read(head), interception: session, snapshot: snapshot, maxHeadBytes: 65_536)
    }

    static func refusal(_ decision: RoutingDecision) -> ProxyError? {
        if case .failure(let error) = decision.result { return error }
        return nil
    }

    @Test func aHostAcceptedOnceIsNotCheckedAgainInTheSameSession() throws {
        let session = Self.session()
        let first = Self.route(Self.head(), in: session)
        #expect(session.routes.hits == 0)
        let second = Self.route(Self.head("/v1/other"), in: session)
        #expect(session.routes.hits == 1, "the second request's Host was taken from the session's cache")
        // The cached path builds the same upstream head as the full check does.
        let fresh = Self.route(Self.head("/v1/other"), in: Self.session())
        let cachedHead = try second.result.get().upstreamHead.whole
        let freshHead = try fresh.result.get().upstreamHead.whole
        #expect(cachedHead.uri == "/v1/other")
        #expect(Array(cachedHead.headers.map { "\($0.name): \($0.value)" }) == Array(freshHead.headers.map { "\($0.name): \($0.value)" }))
        #expect(cachedHead.headers["X-Seen"] == ["yes"], "the policy's header rules still apply")
        _ = try first.result.get()
    }

    @Test(arguments: [
        // A Host of another host, another port, or none at all is refused
        // whatever the session accepted before.
        (["other.test"], ProxyError.Code.hostMismatch, false),
        (["api.test:8443"], .hostMismatch, false),
        (["api.test", "api.test"], .badRequest, true),
        ([String](), .badRequest, false),
        (["api.test/x"], .badRequest, false),
    ])
    func whatDiffersFromTheAcceptedHostIsStillRefused(hosts: [String], code: ProxyError.Code, closes: Bool) throws {
        let session = Self.session()
        _ = try Self.route(Self.head(), in: session).result.get()
        let decision = Self.route(Self.head(hosts: hosts), in: session)
        let refusal = try #require(Self.refusal(decision), "\(hosts) must be refused")
        #expect(refusal.code == code)
        #expect(decision.closeAfter == closes)
        // And the session still accepts its own host afterwards.
        _ = try Self.route(Self.head(), in: session).result.get()
    }

    @Test func anAbsoluteTargetForAnotherHostIsRefusedEvenWithTheAcceptedHost() throws {
        let session = Self.session()
        _ = try Self.route(Self.head(), in: session).result.get()
        let decision = Self.route(Self.head("https://elsewhere.test/v1"), in: session)
        #expect(Self.refusal(decision)?.code == .hostMismatch)
        let same = Self.route(Self.head("https://api.test/v1?q=1"), in: session)
        #expect(try same.result.get().upstreamHead.whole.uri == "/v1?q=1")
    }

    @Test func aRefusedHostIsNotRemembered() throws {
        let session = Self.session()
        #expect(Self.refusal(Self.route(Self.head(hosts: ["other.test"]), in: session))?.code == .hostMismatch)
        #expect(Self.refusal(Self.route(Self.head(hosts: ["other.test"]), in: session))?.code == .hostMismatch)
        #expect(session.routes.hits == 0)
    }
}
