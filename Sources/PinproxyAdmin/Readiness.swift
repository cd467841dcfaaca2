import NIOConcurrencyHelpers

/// What `GET /readyz` checks: the proxy listening, a policy loaded, the
/// interception CA usable, and the proxy able to accept connections (a
/// listener that is bound but failing to accept, out of file descriptors,
/// serves nobody). All four must hold for a 200.
public struct ReadinessStatus: Sendable, Hashable {
    public var listening: Bool
    public var policyLoaded: Bool
    public var caUsable: Bool
    public var accepting: Bool

    public init(listening: Bool, policyLoaded: Bool, caUsable: Bool, accepting: Bool = true) {
        self.listening = listening
        self.policyLoaded = policyLoaded
        self.caUsable = caUsable
        self.accepting = accepting
    }

    public var isReady: Bool { listening && policyLoaded && caUsable && accepting }

    /// The names of the checks that fail, in a fixed order.
    public var missing: [String] {
        [("listening", listening), ("policy_loaded", policyLoaded), ("ca_usable", caUsable), ("accepting", accepting)]
            .filter { !$0.1 }.map(\.0)
    }
}

/// Readiness flags the proxy flips as it starts (and back, if it loses its
/// listener or its CA). A ready-made provider for `AdminServer`:
/// `readiness: state.status`.
public final class ReadinessState: Sendable {
    private let box: NIOLockedValueBox<ReadinessStatus>

    public init(listening: Bool = false, policyLoaded: Bool = false, caUsable: Bool = false) {
        box = NIOLockedValueBox(ReadinessStatus(listening: listening, policyLoaded: policyLoaded, caUsable: caUsable))
    }

    public var status: ReadinessStatus { box.withLockedValue { $0 } }

    public func setListening(_ value: Bool) { box.withLockedValue { $0.listening = value } }
    public func setPolicyLoaded(_ value: Bool) { box.withLockedValue { $0.policyLoaded = value } }
    public func setCAUsable(_ value: Bool) { box.withLockedValue { $0.caUsable = value } }
}
