import Foundation

/// A root → intermediate → leaf chain made with the openssl CLI, so the code
/// under test is checked against an independent producer of certificates.
public struct TestPKI: Sendable {
    public enum KeyType: String, Sendable, CaseIterable {
        case ecdsa
        case rsa
    }

    public let directory: String
    public let rootCertificate: String
    public let rootKey: String
    public let intermediateCertificate: String
    public let intermediateKey: String
    public let leafCertificate: String
    public let leafKey: String
    /// leaf + intermediate: what a server sends.
    public let chainFile: String

    /// Makes the chain in `directory/name/`. The leaf's SAN lists `names`
    /// (IP literals become IP entries).
    public static func make(in directory: TemporaryDirectory, name: String = "pki", keyType: KeyType = .ecdsa,
                            names: [String] = ["localhost", "127.0.0.1"], rootSubject: String? = nil) throws -> TestPKI {
        let dir = directory.file(name)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        func path(_ file: String) -> String { "\(dir)/\(file)" }
        let keyArgs: [String] = keyType == .ecdsa
            ? ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
            : ["-newkey", "rsa:2048"]

        try ChildProcess.check("openssl", ["req", "-x509", "-nodes"] + keyArgs + [
            "-keyout", path("root-key.pem"), "-out", path("root.pem"), "-days", "30",
            "-subj", rootSubject ?? "/O=pinproxy tests/CN=Test Root \(name) \(keyType.rawValue)",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
        try ChildProcess.check("openssl", ["req", "-nodes"] + keyArgs + [
            "-keyout", path("intermediate-key.pem"), "-out", path("intermediate.csr"),
            "-subj", "/O=pinproxy tests/CN=Test Intermediate \(name) \(keyType.rawValue)",
        ])
        try "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n"
            .write(toFile: path("intermediate.ext"), atomically: true, encoding: .utf8)
        try ChildProcess.check("openssl", [
            "x509", "-req", "-in", path("intermediate.csr"), "-CA", path("root.pem"), "-CAkey", path("root-key.pem"),
            "-CAcreateserial", "-out", path("intermediate.pem"), "-days", "20", "-sha256", "-extfile", path("intermediate.ext"),
        ])
        try ChildProcess.check("openssl", ["req", "-nodes"] + keyArgs + [
            "-keyout", path("leaf-key.pem"), "-out", path("leaf.csr"), "-subj", "/CN=\(names.first ?? "localhost")",
        ])
        let san = names.map { TestPKI.isIP($0) ? "IP:\($0)" : "DNS:\($0)" }.joined(separator: ",")
        try "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=\(san)\n"
            .write(toFile: path("leaf.ext"), atomically: true, encoding: .utf8)
        try ChildProcess.check("openssl", [
            "x509", "-req", "-in", path("leaf.csr"), "-CA", path("intermediate.pem"), "-CAkey", path("intermediate-key.pem"),
            "-CAcreateserial", "-out", path("leaf.pem"), "-days", "10", "-sha256", "-extfile", path("leaf.ext"),
        ])
        let chain = try String(contentsOfFile: path("leaf.pem"), encoding: .utf8) + String(contentsOfFile: path("intermediate.pem"), encoding: .utf8)
        try chain.write(toFile: path("chain.pem"), atomically: true, encoding: .utf8)
        return TestPKI(
            directory: dir, rootCertificate: path("root.pem"), rootKey: path("root-key.pem"),
            intermediateCertificate: path("intermediate.pem"), intermediateKey: path("intermediate-key.pem"),
            leafCertificate: path("leaf.pem"), leafKey: path("leaf-key.pem"), chainFile: path("chain.pem"))
    }

    /// Another leaf (a new key) under the same intermediate: (certificate, key, chain) paths.
    public func makeLeaf(named name: String, names: [String]) throws -> (certificate: String, key: String, chain: String) {
        func path(_ file: String) -> String { "\(directory)/\(name)-\(file)" }
        try ChildProcess.check("openssl", ["req", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                                           "-keyout", path("key.pem"), "-out", path("leaf.csr"), "-subj", "/CN=\(names.first ?? "localhost")"])
        let san = names.map { TestPKI.isIP($0) ? "IP:\($0)" : "DNS:\($0)" }.joined(separator: ",")
        try "basicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=\(san)\n"
            .write(toFile: path("leaf.ext"), atomically: true, encoding: .utf8)
        try ChildProcess.check("openssl", ["x509", "-req", "-in", path("leaf.csr"), "-CA", intermediateCertificate, "-CAkey", intermediateKey,
                                           "-CAcreateserial", "-out", path("leaf.pem"), "-days", "10", "-sha256", "-extfile", path("leaf.ext")])
        let chain = try String(contentsOfFile: path("leaf.pem"), encoding: .utf8) + String(contentsOfFile: intermediateCertificate, encoding: .utf8)
        try chain.write(toFile: path("chain.pem"), atomically: true, encoding: .utf8)
        return (path("leaf.pem"), path("key.pem"), path("chain.pem"))
    }

    /// The SPKI pin of a PEM certificate as the openssl CLI computes it (RFC 7469's recipe).
    public static func opensslSPKIPin(_ certificatePath: String) throws -> String {
        let script = "openssl x509 -in '\(certificatePath)' -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64"
        return try ChildProcess.check("/bin/sh", ["-c", script]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func isIP(_ text: String) -> Bool {
        text.contains(":") || text.allSatisfy { $0.isNumber || $0 == "." }
    }
}
