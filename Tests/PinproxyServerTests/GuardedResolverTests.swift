import NIOCore
import NIOPosix
import PinproxyPolicy
import Testing

@testable import PinproxyServer

/// The resolver NIO's Happy Eyeballs dials through: only vetted addresses
/// come out of it. Literals and `localhost` only: nothing leaves loopback.
@Suite("Guarded resolver")
struct GuardedResolverTests {
    let loop = MultiThreadedEventLoopGroup.singleton.next()

    @Test func everyAddressRefusedFailsBothQueriesWithSSRFBlocked() async throws {
        let resolver = GuardedResolver(addressGuard: AddressGuard(denyPrivate: true, allow: []), requestedHost: "localhost", loop: loop)
        await #expect(throws: ProxyError.self) { _ = try await resolver.initiateAQuery(host: "127.0.0.1", port: 443).get() }
        do {
            _ = try await resolver.initiateAAAAQuery(host: "127.0.0.1", port: 443).get()
            Issue.record("the AAAA query must fail too")
        } catch let refusal as ProxyError {
            #expect(refusal.code == .ssrfBlocked)
            #expect(refusal.detail.contains("loopback"))
        }
    }

    @Test func allowedAddressesComeOutByFamily() async throws {
        let allow = try CIDR(parsing: "127.0.0.0/8")
        let resolver = GuardedResolver(addressGuard: AddressGuard(denyPrivate: true, allow: [allow]), requestedHost: "a.test", loop: loop)
        let v4 = try await resolver.initiateAQuery(host: "127.0.0.1", port: 8443).get()
        let v6 = try await resolver.initiateAAAAQuery(host: "127.0.0.1", port: 8443).get()
        #expect(v4.map(\.port) == [8443])
        #expect(v6.isEmpty)
    }

    @Test func anIPv6LiteralComesOutOfTheAAAAQueryOnly() async throws {
        let allow = try CIDR(parsing: "::1/128")
        let resolver = GuardedResolver(addressGuard: AddressGuard(denyPrivate: true, allow: [allow]), requestedHost: "a.test", loop: loop)
        let v4 = try await resolver.initiateAQuery(host: "::1", port: 1).get()
        let v6 = try await resolver.initiateAAAAQuery(host: "::1", port: 1).get()
        #expect(v4.isEmpty)
        #expect(v6.map(\.ipAddress) == ["::1"])
    }
}
