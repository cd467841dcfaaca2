import Prometheus

/// One metric of docs/contract.md §6: its name (without the `pinproxy_` prefix), help
/// text and label names in emission order. Defined once here, so a name or a
/// label order can never differ between two call sites (the registry treats
/// `[(a, 1), (b, 2)]` and `[(b, 2), (a, 1)]` as different series).
struct MetricFamily: Sendable {
    static let prefix = "pinproxy_"

    let name: String
    let help: String
    let labels: [String]

    var fullName: String { Self.prefix + name }

    var descriptor: MetricNameDescriptor {
        MetricNameDescriptor(metricName: fullName, unitName: "", helpText: help)
    }

    /// Pairs the label names with `values`, which must come in the same order.
    func labelPairs(_ values: [String]) -> [(String, String)] {
        precondition(values.count == labels.count, "\(fullName) takes labels \(labels), got \(values)")
        return Array(zip(labels, values))
    }
}

extension MetricFamily {
    static let requests = MetricFamily(
        name: "requests_total",
        help: "Requests answered, by policy host, HTTP status (refusals included), client identity and the app's HTTP version.",
        labels: ["host", "code", "client", "protocol"])
    static let requestDuration = MetricFamily(
        name: "request_duration_seconds", help: "Time from request head to the end of the response.",
        labels: ["host"])
    static let upstreamHandshakes = MetricFamily(
        name: "upstream_handshakes_total", help: "Upstream connection attempts, by how the TLS handshake ended.",
        labels: ["host", "result"])
    static let upstreamHandshakeDuration = MetricFamily(
        name: "upstream_handshake_duration_seconds", help: "Upstream TCP connect plus TLS handshake time.",
        labels: ["host"])
    static let pinValidations = MetricFamily(
        name: "pin_validations_total", help: "Pin evaluations of verified upstream chains, by verdict.",
        labels: ["host", "result"])
    static let denied = MetricFamily(
        name: "denied_total", help: "Refusals, by error code and client identity.",
        labels: ["reason", "client"])
    static let proxyAuthFailures = MetricFamily(
        name: "proxy_auth_failures_total", help: "Failed proxy logins (Proxy-Authorization), by the configured identity named (_unknown: none).",
        labels: ["client"])
    static let responsesCut = MetricFamily(
        name: "responses_cut_total",
        help: "Responses cut short after their head reached the app (the upstream closed or stalled mid-body), by reason.",
        labels: ["host", "reason"])
    static let upstreamViolations = MetricFamily(
        name: "upstream_violations_total",
        help: "Upstream answers that broke HTTP's framing rules and were not passed on (body_on_bodiless_response: a body with a 204, a 304 or a HEAD answer).",
        labels: ["host", "kind"])
    static let clientHandshakes = MetricFamily(
        name: "client_handshakes_total",
        help: "TLS handshakes of apps on intercepted sessions, by result (untrusted_ca: the app refused pinproxy's certificate).",
        labels: ["result"])
    static let clientConnections = MetricFamily(
        name: "client_connections", help: "Open client connections.",
        labels: [])
    static let upstreamConnections = MetricFamily(
        name: "upstream_connections", help: "Open upstream connections (pooled or in use).",
        labels: ["host"])
    static let upstreamStreams = MetricFamily(
        name: "upstream_streams", help: "Open HTTP/2 streams on upstream connections.",
        labels: ["host"])
    static let bytes = MetricFamily(
        name: "bytes_total", help: "Payload bytes relayed; up is client to upstream.",
        labels: ["host", "direction"])
    static let tokenRefreshes = MetricFamily(
        name: "token_refreshes_total", help: "Token refresh attempts of an OAuth2 credential (a Spotify session or a credentials entry), by outcome.",
        labels: ["session", "credential", "result"])
    static let tokenExpiry = MetricFamily(
        name: "token_expiry_timestamp_seconds", help: "When the cached access token of a session expires.",
        labels: ["session", "credential"])
    static let refreshTokenStoreFailures = MetricFamily(
        name: "refresh_token_store_failures_total",
        help: "Rotated Spotify refresh tokens that could not be written to their file (kept in memory).",
        labels: ["session", "credential"])
    static let refreshTokenIssued = MetricFamily(
        name: "refresh_token_issued_timestamp_seconds",
        help: "When the stored refresh token of a session was issued (consent or last rotation).",
        labels: ["session", "credential"])
    static let storeUp = MetricFamily(
        name: "store_up", help: "1 when the session store shared by the replicas answers, 0 when it cannot be reached.",
        labels: [])
    static let pinExpiry = MetricFamily(
        name: "pin_expiry_timestamp_seconds",
        help: "End of pinned coverage: the last moment up to which some pin of the policy stays active without a gap; 0 when none is active now, +Inf when coverage reaches a pin without not_after.",
        labels: ["host"])
    static let upstreamCertExpiry = MetricFamily(
        name: "upstream_cert_expiry_timestamp_seconds", help: "notAfter of the upstream leaf certificate last seen.",
        labels: ["host"])
    static let probeSuccess = MetricFamily(
        name: "probe_success", help: "1 when the last active handshake probe of a policy passed, else 0.",
        labels: ["host"])
    static let policyReloads = MetricFamily(
        name: "policy_reloads_total", help: "Policy reload attempts, by outcome.",
        labels: ["result"])
    static let policyLastReloadSuccess = MetricFamily(
        name: "policy_last_reload_success_timestamp_seconds",
        help: "When the serving policy set was loaded (start or last successful reload).",
        labels: [])
    static let mintedCertificates = MetricFamily(
        name: "minted_certificates_total", help: "Interception leaf certificates minted (LRU cache misses).",
        labels: [])
    static let upstreamTLSInfo = MetricFamily(
        name: "upstream_tls_info", help: "1 for the TLS version and cipher last negotiated with a policy's upstream.",
        labels: ["host", "version", "cipher"])
    static let buildInfo = MetricFamily(
        name: "build_info", help: "pinproxy version; always 1.",
        labels: ["version"])
    static let swapRequests = MetricFamily(
        name: "swap_requests_total", help: "Token swap backend requests, by endpoint and outcome.",
        labels: ["endpoint", "result"])
}

/// Histogram buckets. Requests go through a proxy to internet APIs: tens of
/// milliseconds to tens of seconds (a `response_timeout` is 30 s by default).
/// Handshakes are a TCP connect plus one or two round trips; above the
/// default 5 s `handshake_timeout` only the +Inf bucket matters.
enum Buckets {
    static let request: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5),
        .seconds(10), .seconds(30), .seconds(60),
    ]
    static let handshake: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
    ]
}
