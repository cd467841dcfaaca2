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
    /// The ports a policy without `ports:` lets a CONNECT reach (Squid's `SSL_ports`).
    public static let connectPorts = [443]
    /// The ports a policy without `ports:` lets an absolute-form request reach
    /// (HTTP's and HTTPS's, the well-known part of Squid's `Safe_ports`).
    public static let absoluteFormPorts = [80, 443]
}
