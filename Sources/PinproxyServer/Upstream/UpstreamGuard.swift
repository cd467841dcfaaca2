import NIOCore
import NIOPosix
import PinproxyPolicy

/// The SSRF guard for callers outside the proxy that must dial exactly as it
/// does (`pinproxy explain --connect`, docs/contract.md §13): the same
/// resolver (`GuardedResolver`) and the same refusal, so explain cannot say
/// "served" where the proxy answers 403 `ssrf_blocked`.
public enum UpstreamGuard {
    /// The resolver the proxy dials through, vetting every address under `network`.
    public static func resolver(network: PinproxyConfig.Network, host: String, loop: any EventLoop) -> any Resolver & Sendable {
        GuardedResolver(addressGuard: AddressGuard(network), requestedHost: host, loop: loop)
    }

    /// The guard's refusal, when that is why a dial through `resolver` failed.
    public static func refusal(in error: any Error) -> ProxyError? {
        let refusal = (error as? ProxyError)
            ?? (error as? NIOConnectionError).flatMap { ($0.dnsAError ?? $0.dnsAAAAError) as? ProxyError }
        guard let refusal, refusal.code == .ssrfBlocked else { return nil }
        return refusal
    }
}
