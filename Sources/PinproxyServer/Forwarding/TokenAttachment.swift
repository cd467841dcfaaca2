import NIOHTTP1
import PinproxyPolicy

/// Whether a request gets the policy's bearer token: only over TLS, only on
/// a connection whose pins permit it (a match, or a mismatch inside a
/// declared transition window, unless `attach_unpinned` says more), and
/// never on TRACE, whose response echoes the request back to the app
/// (RFC 9110 §9.3.8). Pure: the policy, the verdict and the method in.
enum TokenAttachment {
    struct Decision: Equatable {
        var authorization: ExchangeStateMachine<UpstreamConnection>.Authorization
        /// Why a token the policy names was not attached, for the log.
        var withheldBecause: String?
    }

    /// `verdict` is read only when the policy attaches a credential: the
    /// common request, without one, makes no copy of it (its pin holds the
    /// policy's strings).
    static func decide(policy: HostPolicy?, verdict: () -> PinVerdict?, method: HTTPMethod, tls: Bool, identity: String? = nil) -> Decision {
        guard let auth = policy?.spec.auth else { return Decision(authorization: .untouched) }
        let withheld = ExchangeStateMachine<UpstreamConnection>.Authorization.withheld(
            removeClientAuthorization: auth.replaceClientAuth, header: auth.header)
        let credential: String
        switch auth.resolve(identity: identity) {
        case .credential(let name):
            credential = name
        case .none:
            // `by_client` maps no credential to this client and `default: none`: it goes without.
            return Decision(authorization: withheld)
        case .denied:
            let who = identity.map { "client `\($0)`" } ?? "an anonymous client"
            return Decision(authorization: .denied(detail: "the policy maps no credential to \(who) (`auth.by_client`, `require: true`)"))
        }
        if method == .TRACE {
            return Decision(authorization: withheld, withheldBecause: "TRACE echoes the request")
        }
        guard tls else {
            return Decision(authorization: withheld, withheldBecause: "no TLS to the upstream")
        }
        let pins = verdict()
        guard let pins, pins.permitsTokenAttachment(attachUnpinned: auth.attachUnpinned) else {
            return Decision(authorization: withheld,
                            withheldBecause: "the upstream's pins did not permit it (\(pins?.metricLabel ?? "no verdict"))")
        }
        return Decision(authorization: .attach(session: credential, header: auth.header, format: auth.format))
    }
}
