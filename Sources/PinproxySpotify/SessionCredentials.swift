import Foundation
import PinproxyPolicy

/// Builds a session's token request from its configuration, reading the
/// secret file and the refresh-token file at each use so that rotated files
/// are picked up without a reload (docs/contract.md §3).
struct SessionCredentials: Sendable {
    let config: SpotifySession
    let store: RefreshTokenStore?

    init(config: SpotifySession) {
        self.config = config
        self.store = config.refreshTokenFile.map(RefreshTokenStore.init(path:))
    }

    struct Request {
        var form: [(String, String)]
        var basicAuth: (user: String, password: String)?
        /// The refresh-token file was (re)read; its mtime.
        var refreshTokenFileModifiedAt: Date?
    }

    /// A problem found before any call: the session cannot ask at all.
    enum Problem: Error, Equatable {
        case secret(String)
        case noRefreshToken(String)

        var status: TokenSessionStatus {
            switch self {
            case .secret(let reason): return .misconfigured(reason: reason)
            case .noRefreshToken(let reason): return .needsReauthorization(reason: reason)
            }
        }
    }

    /// - Parameter refreshToken: with a shared store, the row's refresh token
    ///   (or the file's seed): the file is then not read (docs/contract.md §12).
    func request(refreshToken override: Secret? = nil) -> Result<Request, Problem> {
        let secret: String?
        switch readSecret() {
        case .success(let value): secret = value
        case .failure(let problem): return .failure(problem)
        }
        let basicAuth = secret.map { (user: config.clientID, password: $0) }
        switch config.flow {
        case .clientCredentials:
            guard let basicAuth else { return .failure(.secret("flow client_credentials needs a client secret")) }
            return .success(Request(form: [("grant_type", "client_credentials")], basicAuth: basicAuth,
                                    refreshTokenFileModifiedAt: nil))
        case .refreshToken:
            if let override {
                var form = [("grant_type", "refresh_token"), ("refresh_token", override.reveal())]
                if basicAuth == nil { form.append(("client_id", config.clientID)) }
                return .success(Request(form: form, basicAuth: basicAuth, refreshTokenFileModifiedAt: nil))
            }
            guard let store else { return .failure(.noRefreshToken("no refresh_token_file configured")) }
            let loaded: RefreshTokenStore.Loaded
            switch store.load() {
            case .success(let value): loaded = value
            case .failure(.missing): return .failure(.noRefreshToken("no refresh token stored in \(store.path); run `pinproxy spotify login \(config.name)`"))
            case .failure(.empty): return .failure(.noRefreshToken("refresh token file \(store.path) is empty; run `pinproxy spotify login \(config.name)`"))
            case .failure(.unreadable(let reason)): return .failure(.noRefreshToken("refresh token file unreadable: \(reason)"))
            }
            var form = [("grant_type", "refresh_token"), ("refresh_token", loaded.token.reveal())]
            // PKCE clients have no secret: they name themselves in the body (docs/contract.md §7).
            if basicAuth == nil { form.append(("client_id", config.clientID)) }
            return .success(Request(form: form, basicAuth: basicAuth,
                                    refreshTokenFileModifiedAt: loaded.readFromFileModifiedAt))
        }
    }

    /// Identifies the credentials as the files hold them now, so a session
    /// refused as misconfigured or unauthorised notices when someone fixes
    /// them. An in-process hash (randomly seeded): never stored or shown.
    /// Reads the files directly, leaving the store's memory alone.
    func fingerprint() -> Int {
        var hasher = Hasher()
        hasher.combine(config.clientID)
        switch readSecret() {
        case .success(let secret): hasher.combine(secret)
        case .failure(let problem): hasher.combine("\(problem)")
        }
        if let store {
            switch SecretFile.read(store.path) {
            case .success(let token): hasher.combine(token)
            case .failure(let error): hasher.combine("\(error)")
            }
        }
        return hasher.finalize()
    }

    private func readSecret() -> Result<String?, Problem> {
        switch config.clientSecret {
        case nil: return .success(nil)
        case .inline(let secret): return .success(secret.reveal())
        case .file(let path):
            switch SecretFile.read(path) {
            case .success(let value): return .success(value)
            case .failure(.missing): return .failure(.secret("client secret file \(path) does not exist"))
            case .failure(.empty): return .failure(.secret("client secret file \(path) is empty"))
            case .failure(.unreadable(let reason)): return .failure(.secret("client secret file unreadable: \(reason)"))
            }
        }
    }
}
