import NIOCore
import PinproxyPolicy

/// A token's generation as the provider numbered it. A 401 to a request
/// sent with it invalidates that generation and no other, so a token
/// another exchange refreshed meanwhile is not thrown away.
struct TokenGeneration: Hashable {
    let rawValue: Int
}

/// Where a credential's token goes in the upstream head (`auth.header`,
/// `auth.format`).
struct TokenPlacement: Equatable {
    var credential: String
    var header: String = "Authorization"
    var format: String = "Bearer {token}"

    func value(for token: String) -> String {
        AuthPolicy.headerValue(format: format, token: token)
    }
}

/// The bearer token's part in one exchange, as the machine decides it.
enum TokenStage: Equatable {
    /// No token goes up with this request (the policy attaches none, or it was withheld).
    case none
    /// An upstream connection is held while the credential's token is fetched.
    case fetching(TokenPlacement)
    /// The token went up with the request: a 401 invalidates this generation.
    case attached(TokenPlacement, TokenGeneration)

    /// The credential whose token went up, if one did.
    var attachedCredential: String? {
        if case .attached(let placement, _) = self { return placement.credential }
        return nil
    }
}

/// Why no token goes up with a request that should carry one; turned into
/// a refusal (`token_unavailable`, `upstream_throttled`) by the machine.
enum TokenFailure: Equatable {
    /// No token sessions are configured at all.
    case noSessions
    /// The provider could not give one; its description says why, never a secret.
    case unavailable(String)
    /// The upstream answered 429 to this credential: it hears nothing for this long.
    case throttled(seconds: Int)
}

/// The request body kept so that a 401 to a token can be answered by one
/// replay with a fresh token (`ExchangeStateMachine.replayLimit`).
enum Replay {
    /// The policy attaches no token, or the body outgrew the limit: a 401 goes to the app.
    case unavailable
    /// The body read so far.
    case keeping([ByteBuffer], bytes: Int)
    /// The one replay was used; a second 401 goes to the app.
    case used

    /// Keeps `body` while the kept bytes stay within `limit`.
    mutating func keep(_ body: ByteBuffer, limit: Int) {
        guard case .keeping(var parts, let bytes) = self else { return }
        let total = bytes + body.readableBytes
        guard total <= limit else {
            self = .unavailable
            return
        }
        self = .unavailable  // not two references to the array while it grows
        parts.append(body)
        self = .keeping(parts, bytes: total)
    }
}
