import Foundation
import PinproxyPolicy

/// A config tree in a fresh temp dir: `pinproxy.yaml` and `policies/*.yaml`.
final class ConfigTree {
    let root: String

    init(main: String = "policies: policies\n", policies: [String: String] = [:]) throws {
        root = FileManager.default.temporaryDirectory
            .appendingPathComponent("pinproxy-policy-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root + "/policies", withIntermediateDirectories: true)
        try write("pinproxy.yaml", main)
        for (name, text) in policies { try write("policies/" + name, text) }
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    func write(_ relative: String, _ text: String) throws {
        try text.write(toFile: root + "/" + relative, atomically: true, encoding: .utf8)
    }

    func loader(environment: [String: String] = [:], now: Date = Fixture.now, horizon: Duration = PolicyLoader.defaultHorizon) -> PolicyLoader {
        PolicyLoader(configFile: root + "/pinproxy.yaml", environment: environment, workingDirectory: root,
                     horizon: horizon, clock: { now })
    }

    /// Diagnostics with the temp dir cut out of files and messages.
    func rendered(_ diagnostics: [Diagnostic]) -> [String] {
        diagnostics.map { $0.description.replacingOccurrences(of: root + "/", with: "") }
    }
}

enum Fixture {
    /// "Today" for every test: 2026-11-22T12:00:00Z.
    static let now = date("2026-11-22T12:00:00Z")

    static func date(_ text: String, bound: DateText.Bound = .start) -> Date {
        DateText.parse(text, bound: bound)!
    }

    /// 32 bytes of base64 that differ per seed.
    static func pin(_ seed: UInt8) -> String {
        Data(repeating: seed, count: 32).base64EncodedString()
    }

    static func days(_ n: Double) -> TimeInterval { n * 86400 }
}
