import PinproxyPolicy

/// What one intercepted session's requests have proved, so the next request
/// need not prove it again: the last `Host` value that matched the CONNECT
/// host and port. The session's host, port and policy are fixed when it is
/// opened (a reload changes them for new connections only), so what matched
/// once matches for the session's life. Used only on the session's event
/// loop (its HTTP/1.1 handler, or its HTTP/2 streams, which share the
/// connection's loop).
final class SessionRouteCache: @unchecked Sendable {
    private var hostValue: String?
    /// Requests whose Host check was skipped (tests).
    private(set) var hits = 0
    /// The series the session's requests are counted in, resolved by the
    /// first that ends. An HTTP/2 stream has an exchange handler of its own,
    /// so a cache in the handler was a recorder, a host-series lookup and a
    /// requests-series lookup per stream (issue 33).
    private var traffic: (policy: HostPolicy?, recorder: any TrafficRecorder)?

    /// The recorder for `policy`'s series, made by `resolve` once (again only
    /// if a request of the session ends under another policy: a malformed
    /// head is counted under none).
    func trafficRecorder(policy: HostPolicy?, resolve: (HostPolicy?) -> any TrafficRecorder) -> any TrafficRecorder {
        // Compared where `traffic` holds it: the tuple bound to a name was a
        // copy, a retain of the policy (which every loop shares) per request.
        if let recorder = traffic?.recorder, traffic?.policy === policy { return recorder }
        let recorder = resolve(policy)
        traffic = (policy, recorder)
        return recorder
    }

    func acceptedHost(_ value: String) -> Bool {
        guard hostValue == value else { return false }
        hits += 1
        return true
    }

    func accept(_ value: String) {
        hostValue = value
    }
}
