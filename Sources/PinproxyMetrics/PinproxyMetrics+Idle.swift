import PinproxyPolicy

/// What an idle close ended (docs/contract.md §6 `idle_closes_total`).
public enum IdleCloseKind: String, Sendable, CaseIterable {
    /// A CONNECT tunnel (action `tunnel`): a blind splice.
    case tunnel
    /// A WebSocket splice after an upstream `101` (docs/contract.md §11).
    case websocket
}

extension MetricFamily {
    static let idleCloses = MetricFamily(
        name: "idle_closes_total",
        help: "Spliced connections (CONNECT tunnels, WebSocket) closed after limits.idle_timeout with no byte either way, by policy host and kind.",
        labels: ["host", "kind"])
}

extension PinproxyMetrics {
    /// A splice closed because no byte moved either way for `limits.idle_timeout`.
    public func idleClosed(host: HostLabel, kind: IdleCloseKind) {
        counter(.idleCloses, host.value, kind.rawValue).increment()
    }
}
