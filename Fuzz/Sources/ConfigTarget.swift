import Foundation
import PinproxyPolicy

/// Target `config`: a main file and a policy file (the input cut at the first
/// 0x00 0xFF), written to a temp directory and loaded as `check` and a reload
/// would load them: YAML with marks, every key, the validators, the TLS
/// contexts. Every diagnostic is rendered, as `check` prints it.
enum ConfigTarget {
    static let directory: String = {
        let path = NSTemporaryDirectory() + "pinproxy-fuzz-config-\(getpid())"
        try? FileManager.default.createDirectory(atPath: path + "/etc/policies", withIntermediateDirectories: true)
        // Written for every input, so removed only when libFuzzer ends the process.
        atexit { try? FileManager.default.removeItem(atPath: ConfigTarget.directory) }
        return path
    }()

    static func run(_ input: [UInt8]) {
        let parts = FuzzInput.segments(input[...], limit: 2)
        let main = parts[0]
        let policy = parts.count > 1 ? parts[1] : []
        _ = FileManager.default.createFile(atPath: directory + "/etc/pinproxy.yaml", contents: Data(main))
        _ = FileManager.default.createFile(atPath: directory + "/etc/policies/p.yaml", contents: Data(policy))
        let loader = PolicyLoader(configFile: directory + "/etc/pinproxy.yaml", environment: ["FUZZ_SECRET": "s3cret"],
                                  workingDirectory: directory)
        let result = loader.load()
        for diagnostic in result.diagnostics { precondition(!"\(diagnostic)".isEmpty) }
        if let snapshot = result.snapshot {
            // What the proxy asks of a snapshot per request.
            _ = snapshot.policy(forHost: "api.spotify.com")
            _ = snapshot.policy(forHost: "a.b.example.com")
        }
    }
}
