import NIOCore
import Testing

@testable import PinproxyServer

/// The transparent listener's loop refusals (docs/contract.md §1,
/// "Transparent interception"): decided from the connection's addresses
/// alone, before anything is dialled.
@Suite("Transparent loop checks")
struct TransparentLoopTests {
    let listener = try! SocketAddress(ipAddress: "127.0.0.1", port: 15001)
    let app = try! SocketAddress(ipAddress: "127.0.0.1", port: 40000)
    let redirected = try! SocketAddress(ipAddress: "127.0.0.2", port: 443)

    func detail(_ body: () throws -> SocketAddress) -> String? {
        do {
            _ = try body()
            return nil
        } catch let error as ProxyError {
            return error.detail
        } catch {
            return "\(error)"
        }
    }

    @Test func aRedirectedConnectionGoesToItsOriginalDestination() throws {
        let original = try TransparentLoop.check(original: redirected, client: app, listener: listener, own: OwnUpstreamSockets())
        #expect(original == redirected)
    }

    @Test func aConnectionThatWasNotRedirectedIsRefused() {
        let why = detail { try TransparentLoop.check(original: nil, client: app, listener: listener, own: OwnUpstreamSockets()) }
        #expect(why?.contains("was not redirected") == true, "\(why ?? "accepted")")
    }

    @Test func aConnectionToTheListenerItselfIsRefused() {
        let why = detail { try TransparentLoop.check(original: listener, client: app, listener: listener, own: OwnUpstreamSockets()) }
        #expect(why?.contains("is the transparent listener itself") == true, "\(why ?? "accepted")")
    }

    /// pinproxy's own dial to 127.0.0.2:443, sent back by the redirect: its
    /// source and original destination are that socket's two ends.
    @Test func pinproxysOwnDialSentBackIsRefused() {
        let own = OwnUpstreamSockets()
        own.track(.init(local: app.hostPort, remote: redirected.hostPort))
        let why = detail { try TransparentLoop.check(original: redirected, client: app, listener: listener, own: own) }
        #expect(why?.contains("is pinproxy's own upstream connection") == true, "\(why ?? "accepted")")
    }

    /// Linux gives one ephemeral port to connections to different
    /// destinations: an app's socket can share its local address with a
    /// pooled upstream connection of ours (here to 127.0.0.3:8443). That app
    /// is served, not refused as a loop (a parallel test run once saw it).
    @Test func anAppSharingALocalPortWithAnUpstreamConnectionIsServed() throws {
        let own = OwnUpstreamSockets()
        let pooled = try SocketAddress(ipAddress: "127.0.0.3", port: 8443)
        own.track(.init(local: app.hostPort, remote: pooled.hostPort))
        let original = try TransparentLoop.check(original: redirected, client: app, listener: listener, own: own)
        #expect(original == redirected)
    }

    @Test func aClosedUpstreamSocketIsForgotten() throws {
        let own = OwnUpstreamSockets()
        let pair = OwnUpstreamSockets.Pair(local: app.hostPort, remote: redirected.hostPort)
        own.track(pair)
        own.forget(pair)
        #expect(try TransparentLoop.check(original: redirected, client: app, listener: listener, own: own) == redirected)
    }
}
