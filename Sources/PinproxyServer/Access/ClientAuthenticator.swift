import NIOConcurrencyHelpers
import PinproxyPolicy
import PinproxyTLS

/// What a request's `Proxy-Authorization` proved (docs/contract.md §15).
enum AuthenticationResult: Equatable {
    /// No credential was sent.
    case anonymous
    /// A configured identity, its password checked.
    case identified(String)
    /// A credential that does not check out: 407. `label` is the identity
    /// name when it is configured, `_unknown` otherwise (never the name sent).
    case rejected(label: String, detail: String)
    /// Too many failures from this address: 429, no password work done.
    case rateLimited(retryAfter: Duration)

    static let unknownLabel = "_unknown"
}

/// Checks `Proxy-Authorization` against `clients.identities`, shared by all
/// connections. PBKDF2 costs ~50 ms by design, so a verified credential is
/// remembered per (identity, salted SHA-256 of name and password) for
/// `cacheLifetime`, at most `cacheCapacity` of them, and only while the
/// identity's configured hash is the one it was checked against; failures
/// are never cached (each one counts against the address's limit instead).
/// Passwords are compared in constant time (`PasswordHash.verify`).
final class ClientAuthenticator: Sendable {
    static let cacheLifetime: Duration = .seconds(600)
    static let cacheCapacity = 4096

    private struct CacheEntry {
        var hash: PasswordHash
        var expires: ContinuousClock.Instant
    }

    private struct State {
        var limiter: FailureLimiter
        var verified: [[UInt8]: CacheEntry] = [:]
    }

    private let state: NIOLockedValueBox<State>
    private let now: @Sendable () -> ContinuousClock.Instant
    /// PBKDF2 and the constant-time compare; replaced only by tests that count calls.
    private let verify: @Sendable (PasswordHash, String) -> Bool
    /// Keys the cache's digests, so the table holds nothing a dump could brute-force offline.
    private let cacheKey = SecureRandom.bytes(32)

    init(limits: FailureLimiter.Limits = .standard, now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now },
         verify: @escaping @Sendable (PasswordHash, String) -> Bool = { $0.verify($1) }) {
        self.state = NIOLockedValueBox(State(limiter: FailureLimiter(limits: limits)))
        self.now = now
        self.verify = verify
    }

    /// The identity a request's `Proxy-Authorization` values prove, for a
    /// client at `address`. Runs PBKDF2 on the caller's thread when the
    /// credential is not cached.
    func authenticate(_ headerValues: [String], address: [UInt8]?, identities: [String: ClientIdentity]) -> AuthenticationResult {
        guard let headerValue = headerValues.first else { return .anonymous }
        let at = now()
        let limiterKey = address ?? []
        // Limited per (address, name sent), and looser per address (`FailureLimiter`).
        let credential = headerValues.count == 1 ? ProxyCredential(headerValue: headerValue) : nil
        let user = credential?.user ?? ""
        if let wait = state.withLockedValue({ $0.limiter.blocked(limiterKey, user: user, now: at) }) {
            return .rateLimited(retryAfter: wait)
        }
        guard let credential else {
            return fail(limiterKey, user: user, at: at, label: AuthenticationResult.unknownLabel,
                        detail: "Proxy-Authorization must be one `Basic` credential (NAME:PASSWORD in base64)")
        }
        guard let identity = identities[credential.user] else {
            // The same work as for a known name: timing does not tell which names exist.
            _ = verify(Self.decoy(for: identities), credential.password)
            return fail(limiterKey, user: user, at: at, label: AuthenticationResult.unknownLabel, detail: "wrong name or password")
        }
        let digest = SHA256Digest.hash(cacheKey + Array("\(credential.user):\(credential.password)".utf8))
        let cached = state.withLockedValue { state -> Bool in
            guard let entry = state.verified[digest] else { return false }
            return entry.hash == identity.passwordHash && at < entry.expires
        }
        if cached { return .identified(identity.name) }
        guard verify(identity.passwordHash, credential.password) else {
            return fail(limiterKey, user: user, at: at, label: identity.name, detail: "wrong name or password")
        }
        state.withLockedValue { state in
            if state.verified.count >= Self.cacheCapacity {
                state.verified = state.verified.filter { at < $0.value.expires }
                if state.verified.count >= Self.cacheCapacity { state.verified.removeAll(keepingCapacity: true) }
            }
            state.verified[digest] = CacheEntry(hash: identity.passwordHash, expires: at + Self.cacheLifetime)
        }
        return .identified(identity.name)
    }

    /// Whether `authenticate` would answer without PBKDF2 (no credential, a
    /// cached one, a limited address): callers on an event loop run it in
    /// place then, and on a thread pool otherwise.
    func answersAtOnce(_ headerValues: [String], address: [UInt8]?, identities: [String: ClientIdentity]) -> Bool {
        guard headerValues.count == 1, let credential = ProxyCredential(headerValue: headerValues[0]),
              let identity = identities[credential.user] else { return headerValues.isEmpty }
        let at = now()
        let digest = SHA256Digest.hash(cacheKey + Array("\(credential.user):\(credential.password)".utf8))
        return state.withLockedValue { state in
            if state.limiter.blocked(address ?? [], user: credential.user, now: at) != nil { return true }
            guard let entry = state.verified[digest] else { return false }
            return entry.hash == identity.passwordHash && at < entry.expires
        }
    }

    private func fail(_ address: [UInt8], user: String, at: ContinuousClock.Instant, label: String, detail: String) -> AuthenticationResult {
        state.withLockedValue { $0.limiter.failed(address, user: user, now: at) }
        return .rejected(label: label, detail: detail)
    }

    /// A hash no password matches, shaped like the configured identities'
    /// hashes: PBKDF2 at their most common iteration count (the larger one
    /// on a tie) and their salt length, so an unknown name costs what a
    /// known one with a wrong password costs. A fixed count (the 150,000 of
    /// `pinproxy passwd`) would set unknown names apart whenever the config
    /// holds cheaper hashes (issue 27: 78 ms against 12 ms at 20,000).
    /// With no identity configured it is `pinproxy passwd`'s shape.
    static func decoy(for identities: [String: ClientIdentity]) -> PasswordHash {
        var counts: [Shape: Int] = [:]
        for identity in identities.values {
            counts[Shape(iterations: identity.passwordHash.iterations, saltLength: identity.passwordHash.salt.count), default: 0] += 1
        }
        let shape = counts.max { ($0.value, $0.key.iterations, $0.key.saltLength) < ($1.value, $1.key.iterations, $1.key.saltLength) }?.key
            ?? Shape(iterations: PasswordWorkFactor.defaultIterations, saltLength: PasswordHash.saltLength)
        return PasswordHash(iterations: shape.iterations, salt: Array(decoySalt.prefix(shape.saltLength)), hash: decoyHash)
    }

    private struct Shape: Hashable {
        var iterations: Int
        var saltLength: Int
    }

    /// Random once per process. Configured salts are 16 bytes from `pinproxy
    /// passwd`; one longer than 64 gets a 64-byte decoy salt, which changes
    /// PBKDF2's cost by one hash block at most.
    private static let decoySalt = SecureRandom.bytes(64)
    private static let decoyHash = SecureRandom.bytes(PasswordHash.hashLength)
}
