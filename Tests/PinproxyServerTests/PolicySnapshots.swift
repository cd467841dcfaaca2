import PinproxyPolicy
import PinproxyTestSupport

extension PolicySnapshot {
    /// The snapshot pinproxy loads from a main file (`main`: what follows
    /// its `policies:` and `ca:` lines) and one policy file (`policies`),
    /// written to a temporary directory: for the tests that route and run
    /// exchanges without a server.
    static func loaded(policies: String, main: String = "", directory label: String) -> PolicySnapshot {
        let dir = try! TemporaryDirectory(label)
        _ = try! dir.write("etc/pinproxy.yaml", """
            policies: policies
            ca: { cert: ../state/ca.pem, key: ../state/ca-key.pem }
            \(main)
            """)
        _ = try! dir.write("etc/policies/p.yaml", policies)
        return PolicyLoader(configFile: dir.file("etc/pinproxy.yaml"), environment: [:], workingDirectory: dir.path).load().snapshot!
    }
}
