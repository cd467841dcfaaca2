import Foundation
import PinproxyPolicy
import PostgresNIO

/// `spotify.store` as postgres-nio's client configuration. The password file
/// is read here, at start (trailing white space ignored, as every secret file).
enum StoreClientConfiguration {
    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    static func make(_ config: SpotifyStoreConfig) throws -> PostgresClient.Configuration {
        let password: String?
        switch config.password {
        case nil:
            password = nil
        case .inline(let secret):
            password = secret.reveal()
        case .file(let path):
            guard let data = FileManager.default.contents(atPath: path) else {
                throw Problem(description: "spotify.store.password_file \(path) cannot be read")
            }
            var text = String(decoding: data, as: UTF8.self)
            while let last = text.last, last.isWhitespace { text.removeLast() }
            password = text
        }
        let tls: PostgresClient.Configuration.TLS
        switch config.tls {
        case .disable: tls = .disable
        case .prefer: tls = .prefer(.makeClientConfiguration())
        case .require: tls = .require(.makeClientConfiguration())
        }
        var configuration = PostgresClient.Configuration(host: config.host, port: config.port, username: config.user,
                                                         password: password, database: config.database, tls: tls)
        // A refresh waits for the store no longer than a token request would.
        configuration.options.connectTimeout = .seconds(3)
        configuration.options.maximumConnections = 4
        configuration.options.keepAliveBehavior = .init(frequency: .seconds(15))
        return configuration
    }
}
