/// `clients.allow` (docs/contract.md §15, step 1): the network ACL checked
/// before anything else, when a connection is accepted. One function, so
/// the listener and `pinproxy explain --client IP` refuse the same addresses
/// with the same words.
public enum ClientNetworkACL {
    /// Why a client at `address` is refused (403 `client_denied`), or nil when
    /// `clients.allow` lets it in. An unknown address is refused.
    public static func refusal(address: [UInt8]?, config: PinproxyConfig) -> String? {
        if let address, config.clientsAllow.contains(where: { $0.contains(bytes: address) }) { return nil }
        let text = address.map(IPAddress.format) ?? "this address"
        return "\(text) is not in clients.allow"
    }
}
