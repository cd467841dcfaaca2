import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PinproxyPolicy

/// NIO's `Resolver` with the SSRF guard inside it: one lookup, then only the
/// addresses the guard allows are handed to NIO's Happy Eyeballs connector,
/// so nothing else can ever be dialled, and a name that resolves to both a
/// public and an internal address cannot be used to reach the internal one.
/// When every address is refused, both queries fail with `ssrf_blocked`.
final class GuardedResolver: Resolver, Sendable {
    private let addressGuard: AddressGuard
    /// The name the request asked for, for the refusal's text.
    private let requestedHost: String
    private let loop: any EventLoop
    private let lookup: NIOLockedValueBox<EventLoopFuture<[SocketAddress]>?> = .init(nil)

    init(addressGuard: AddressGuard, requestedHost: String, loop: any EventLoop) {
        self.addressGuard = addressGuard
        self.requestedHost = requestedHost
        self.loop = loop
    }

    func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        vetted(host: host, port: port).map { $0.filter { if case .v4 = $0 { return true } else { return false } } }
    }

    func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        vetted(host: host, port: port).map { $0.filter { if case .v6 = $0 { return true } else { return false } } }
    }

    func cancelQueries() {}

    /// The lookup, run once for both queries, and the guard's verdict on it.
    private func vetted(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        let future = lookup.withLockedValue { cached -> EventLoopFuture<[SocketAddress]> in
            if let cached { return cached }
            let started = NameLookup.resolve(host, port: port, on: loop)
            cached = started
            return started
        }
        let addressGuard = self.addressGuard
        let requestedHost = self.requestedHost
        return future.flatMapErrorThrowing { error in
            throw ProxyError(.connectFailed, host: requestedHost, detail: "\(error)")
        }.flatMapThrowing { addresses in
            var refusals: [String] = []
            let allowed = addresses.filter { address in
                guard let bytes = address.addressBytes, let why = addressGuard.refusal(for: bytes) else { return true }
                refusals.append("\(address.ipAddress ?? "?") (\(why))")
                return false
            }
            guard !allowed.isEmpty else {
                throw ProxyError(.ssrfBlocked, host: requestedHost, detail:
                    "\(host) resolves to \(refusals.joined(separator: ", ")): private addresses are refused unless network.allow lists them")
            }
            return allowed
        }
    }
}
