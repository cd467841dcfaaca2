import Foundation
import Logging
import PinproxyPolicy

/// The token swap backend's logic (docs/contract.md §7, "Token swap"), free of HTTP
/// plumbing: `POST /swap` turns an authorization code into tokens, `POST
/// /refresh` turns an encrypted refresh token into a new access token. The
/// app only ever holds the encrypted form; the client secret stays here.
/// The listener (rate limits, counting) lives in `PinproxyAdmin.SwapServer`.
public struct TokenSwap: Sendable {
    public enum Endpoint: String, Sendable {
        case swap
        case refresh
    }

    /// How a request ended: the `result` label of `swap_requests_total`.
    public enum Outcome: String, Sendable {
        case success
        case spotifyError = "spotify_error"
        case invalidRefreshToken = "invalid_refresh_token"
        case badRequest = "bad_request"
        case unavailable
    }

    public struct Answer: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: [UInt8]
        public var outcome: Outcome
    }

    let config: SpotifySwap
    let session: SpotifySession
    let cipher: RefreshTokenCipher
    let endpoint: any TokenEndpoint
    let logger: Logger

    public enum SetupError: Error, CustomStringConvertible {
        case unknownSession(String)
        case key(String)
        case legacySecret(String)

        public var description: String {
            switch self {
            case .unknownSession(let name): return "spotify.swap.session names no session: \(name)"
            case .key(let reason): return "spotify.swap key: \(reason)"
            case .legacySecret(let reason): return "spotify.swap.legacy_secret_file: \(reason)"
            }
        }
    }

    /// Reads the key (and the legacy secret) now, so a bad one stops `run` at start.
    public init(config: SpotifyConfig, endpoint: any TokenEndpoint, logger: Logger) throws(SetupError) {
        guard let swap = config.swap else { throw .key("no spotify.swap section") }
        guard let session = config.sessions[swap.session] else { throw .unknownSession(swap.session) }
        let keyText: String
        switch swap.key {
        case .inline(let secret): keyText = secret.reveal()
        case .file(let path):
            switch SecretFile.read(path) {
            case .success(let value): keyText = value
            case .failure(let error): throw .key("cannot read \(path): \(error)")
            }
        }
        var legacy: String?
        if let path = swap.legacySecretFile {
            switch SecretFile.read(path) {
            case .success(let value): legacy = value
            case .failure(let error): throw .legacySecret("cannot read \(path): \(error)")
            }
        }
        do {
            cipher = try RefreshTokenCipher(base64Key: keyText, legacySecret: legacy)
        } catch {
            throw .key(error.description)
        }
        self.config = swap
        self.session = session
        self.endpoint = endpoint
        self.logger = logger
    }

    /// `POST /swap`, form `code`.
    public func swap(form: [(String, String)]) async -> Answer {
        guard let code = Self.field("code", form), !code.isEmpty else {
            return Self.error(400, "invalid_request", "code is required", .badRequest)
        }
        return await call(.swap, form: [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", config.redirectURI)])
    }

    /// `POST /refresh`, form `refresh_token` (the encrypted form).
    public func refresh(form: [(String, String)]) async -> Answer {
        guard let sealed = Self.field("refresh_token", form), !sealed.isEmpty else {
            return Self.error(400, "invalid_request", "refresh_token is required", .badRequest)
        }
        guard let token = cipher.decrypt(sealed) else {
            // Not ours, tampered, or made with another key: accounts never hears of it.
            return Self.error(400, "invalid_refresh_token", nil, .invalidRefreshToken)
        }
        return await call(.refresh, form: [("grant_type", "refresh_token"), ("refresh_token", token)])
    }

    private func call(_ endpointName: Endpoint, form: [(String, String)]) async -> Answer {
        var form = form
        let basicAuth: (user: String, password: String)?
        switch readClientSecret() {
        case .failure(let reason):
            logger.error("token swap cannot read the client secret", metadata: ["session": "\(session.name)", "reason": "\(reason)"])
            return Self.error(500, "server_error", nil, .unavailable)
        case .success(let secret?): basicAuth = (session.clientID, secret)
        case .success(nil):
            basicAuth = nil
            form.append(("client_id", session.clientID))
        }
        let response: TokenEndpointResponse
        do {
            response = try await endpoint.requestToken(form: form, basicAuth: basicAuth)
        } catch {
            logger.warning("token swap: the accounts service did not answer", metadata: ["endpoint": "\(endpointName.rawValue)", "error": "\(error)"])
            return Self.error(503, "temporarily_unavailable", nil, .unavailable)
        }
        var headers = [("Content-Type", response.header("Content-Type") ?? "application/json")]
        if let retryAfter = response.header("Retry-After") { headers.append(("Retry-After", retryAfter)) }
        let outcome: Outcome = (200..<300).contains(response.status) ? .success : .spotifyError
        return Answer(status: response.status, headers: headers, body: sealingRefreshToken(in: response.body), outcome: outcome)
    }

    /// The answer with its `refresh_token` (if any) replaced by the encrypted
    /// form. A body that is not a JSON object is passed on as is: it cannot
    /// hold a refresh token we would leak.
    func sealingRefreshToken(in body: [UInt8]) -> [UInt8] {
        guard var object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any],
              let raw = object["refresh_token"] as? String else { return body }
        object["refresh_token"] = cipher.encrypt(raw)
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            // Never pass the raw token on, whatever happens.
            return Array(#"{"error":"server_error"}"#.utf8)
        }
        return Array(data)
    }

    private func readClientSecret() -> Result<String?, RefreshTokenStore.LoadError> {
        switch session.clientSecret {
        case nil: return .success(nil)
        case .inline(let secret): return .success(secret.reveal())
        case .file(let path): return SecretFile.read(path).map { $0 }
        }
    }

    static func field(_ name: String, _ form: [(String, String)]) -> String? {
        form.first { $0.0 == name }?.1
    }

    static func error(_ status: Int, _ code: String, _ description: String?, _ outcome: Outcome) -> Answer {
        var object = ["error": code]
        if let description { object["error_description"] = description }
        let body = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return Answer(status: status, headers: [("Content-Type", "application/json")], body: Array(body), outcome: outcome)
    }
}
