/// The values a host policy has when its file does not say, in one place:
/// the loader fills them in, and the proxy uses them for hosts no policy
/// covers (`default_action: tunnel`).
public enum HostPolicyDefaults {
    public static let connectTimeout: Duration = .seconds(5)
    public static let handshakeTimeout: Duration = .seconds(5)
    public static let responseTimeout: Duration = .seconds(30)
    public static let retries = 2
    public static let maxUpstreamConnections = 64
    public static let queueTimeout: Duration = .seconds(5)
}
