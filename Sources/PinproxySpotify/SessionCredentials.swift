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
        let (basicAuth, clientForm) = clientAuthentication(secret: secret)
        switch config.flow {
        case .clientCredentials:
            guard secret != nil else { return .failure(.secret("flow client_credentials needs a client secret")) }
            return .success(Request(form: [("grant_type", "client_credentials")] + clientForm + parameters,
                                    basicAuth: basicAuth, refreshTokenFileModifiedAt: nil))
        case .refreshToken:
            if let override {
                let form = [("grant_type", "refresh_token"), ("refresh_token", override.reveal())] + clientForm + parameters
                return .success(Request(form: form, basicAuth: basicAuth, refreshTokenFileModifiedAt: nil))
            }
            guard let store else { return .failure(.noRefreshToken("no refresh_token_file configured")) }
            let loaded: RefreshTokenStore.Loaded
            switch store.load() {
            case .success(let value): loaded = value
            case .failure(.missing): return .failure(.noRefreshToken("no refresh token stored in \(store.path); \(config.reauthorizeHint)"))
            case .failure(.empty): return .failure(.noRefreshToken("refresh token file \(store.path) is empty; \(config.reauthorizeHint)"))
            case .failure(.unreadable(let reason)): return .failure(.noRefreshToken("refresh token file unreadable: \(reason)"))
            }
            let form = [("grant_type", "refresh_token"), ("refresh_token", loaded.token.reveal())] + clientForm + parameters
            return .success(Request(form: form, basicAuth: basicAuth,
                                    refreshTokenFileModifiedAt: loaded.readFromFileModifiedAt))
        }
    }

    /// How the client authenticates to the token endpoint, for every grant
    /// and for the login's code exchange: RFC 6749 §2.3.1 Basic (the preset's
    /// way) or the id and secret in the body.
    func clientAuthentication() -> Result<(basicAuth: (user: String, password: String)?, form: [(String, String)]), Problem> {
        readSecret().map { clientAuthentication(secret: $0) }
    }

    private func clientAuthentication(secret: String?) -> (basicAuth: (user: String, password: String)?, form: [(String, String)]) {
        let basicAuth = config.clientAuth == .basic ? secret.map { (user: config.clientID, password: $0) } : nil
        var clientForm: [(String, String)] = []
        if basicAuth == nil {
            // PKCE clients have no secret: they name themselves in the body (docs/contract.md §7).
            clientForm.append(("client_id", config.clientID))
            if let secret { clientForm.append(("client_secret", secret)) }
        }
        return (basicAuth, clientForm)
    }

    /// `scope`, `audience`, `resource` and `extra`, in that order: the
    /// provider's own parameters, sent with every grant.
    private var parameters: [(String, String)] {
        var form: [(String, String)] = []
        if let scope = config.scope { form.append(("scope", scope)) }
        if let audience = config.audience { form.append(("audience", audience)) }
        if let resource = config.resource { form.append(("resource", resource)) }
        for parameter in config.extraParameters { form.append((parameter.name, parameter.value)) }
        return form
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
