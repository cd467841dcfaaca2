import Foundation
import PinproxyTestSupport
import Testing

/// The interception CA as an intermediate under an organisation's root
/// (docs/contract.md §2 `ca csr`, §3 "Interception certificates"): pinproxy
/// writes a request for its key, the organisation's root (here the openssl
/// CLI) signs it, and clients that trust only that root accept the leaves
/// pinproxy mints, because each is served with the intermediate (never the root).
@Suite("Interception CA under an organisation's root", .blockingWaits, .serialized)
struct IntermediateCATests {
    static let caConfig = """
        ca:
          cert: ../state/ca.pem
          key: ../state/ca-key.pem
          chain: ../state/chain.pem

        """

    @Test func aCSRSignedByTheRootMakesLeavesThatClientsTrustingOnlyTheRootAccept() throws {
        let dir = try TemporaryDirectory("pinproxy-intermediate")
        let org = try OrganisationRoot(in: dir)
        let pki = try TestPKI.make(in: dir, names: ["org.test"])
        let upstream = try ScriptedUpstream(directory: dir, tls: (pki.chainFile, pki.leafKey))
        let mainConfig = Self.caConfig + "network:\n  allow: [127.0.0.0/8]\n"
        // The config `ca csr` reads; the harness writes the same file again below.
        try dir.write("etc/pinproxy.yaml", mainConfig + "policies: policies\n")
        try dir.write("etc/policies/test.yaml", "hosts: []\n")

        let csr = try PinproxyBinary.run(["ca", "csr", "--config", dir.file("etc/pinproxy.yaml"), "--out", dir.file("ca.csr")])
        #expect(csr.status == 0, "\(csr.stderr)")
        #expect(csr.stderr.contains("created \(dir.file("state/ca-key.pem")) (mode 0600)"), "\(csr.stderr)")
        #expect(TextFile.permissions(dir.file("state/ca-key.pem")) == 0o600)
        // A well-formed request, signed by the key it names, asking to be a CA.
        let request = try ChildProcess.check("openssl", ["req", "-in", dir.file("ca.csr"), "-noout", "-verify", "-text"])
        #expect(request.contains("CN = pinproxy interception CA"), "\(request)")
        #expect(request.contains("CA:TRUE"), "\(request)")

        try org.sign(request: dir.file("ca.csr"), out: dir.file("state/ca.pem"))
        // The chain file may end with the root; it is checked, never served.
        try FileManager.default.copyItem(atPath: org.certificate, toPath: dir.file("state/chain.pem"))
        let check = try PinproxyBinary.run(["check", "--config", dir.file("etc/pinproxy.yaml")])
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)")

        // A second request for the same key: the key is kept, not replaced.
        let again = try PinproxyBinary.run(["ca", "csr", "--config", dir.file("etc/pinproxy.yaml")])
        #expect(again.status == 0 && again.stdout.hasPrefix("-----BEGIN CERTIFICATE REQUEST-----"), "\(again.stderr)")
        #expect(!again.stderr.contains("created"))

        // `ca show`: the intermediate, then each certificate of the chain, with issuer and fingerprint.
        let shown = try PinproxyBinary.run(["ca", "show", "--config", dir.file("etc/pinproxy.yaml")])
        #expect(shown.status == 0, "\(shown.stderr)")
        let rootFingerprint = try ChildProcess.check("openssl", ["x509", "-in", org.certificate, "-noout", "-fingerprint", "-sha256"])
            .split(separator: "=", maxSplits: 1)[1].trimmingCharacters(in: .whitespacesAndNewlines)
        let blocks = shown.stdout.components(separatedBy: "\nchain 1:\n")
        #expect(blocks.count == 2, "\(shown.stdout)")
        #expect(blocks.first?.contains("subject:     CN=pinproxy interception CA") == true, "\(shown.stdout)")
        #expect(blocks.first?.contains("issuer:      CN=Org Root,O=Org") == true, "\(shown.stdout)")
        #expect(blocks.last?.contains("subject:     CN=Org Root,O=Org") == true, "\(shown.stdout)")
        #expect(blocks.last?.contains("sha256:      \(rootFingerprint)") == true, "\(shown.stdout)")
        #expect(blocks.last?.contains("not_before:  20") == true, "\(shown.stdout)")

        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: "org.test"
                action: intercept
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
            """, mainConfig: mainConfig, directory: dir)

        let curl = try Curl.run("https://org.test/ok", proxy: proxy, caFile: org.certificate, directory: dir)
        #expect(curl.status == 200, "\(curl.stderr)")
        #expect(curl.body == "ok")

        let python = try ProxiedTLSClient.run(proxyPort: proxy.port, host: "org.test", paths: ["/ok"], caFile: org.certificate, directory: dir)
        #expect(python.connectStatus == 200)
        #expect(python.exchanges.first?.status == 200)

        // On the wire: the leaf and the intermediate, not the root.
        let served = try Self.servedChain(proxyPort: proxy.port, host: "org.test", directory: dir)
        #expect(served.count == 2, "\(served)")
        #expect(served.last?.subject == (try Self.subject(of: dir.file("state/ca.pem"))))
        #expect(!served.contains { $0.subject == (try? Self.subject(of: org.certificate)) })
    }

    /// Rotation: a second intermediate under the same root takes the first
    /// one's files; after a restart the same client, trusting only the root,
    /// accepts the new leaves unchanged.
    @Test func rotatingToAnotherIntermediateUnderTheSameRootNeedsNoClientChange() throws {
        let dir = try TemporaryDirectory("pinproxy-intermediate-rotation")
        let org = try OrganisationRoot(in: dir)
        let pki = try TestPKI.make(in: dir, names: ["org.test"])
        let upstream = try ScriptedUpstream(directory: dir, tls: (pki.chainFile, pki.leafKey))
        let first = try org.makeIntermediate(named: "first")
        let second = try org.makeIntermediate(named: "second")
        func install(_ intermediate: (certificate: String, key: String)) throws {
            try FileManager.default.createDirectory(atPath: dir.file("state"), withIntermediateDirectories: true)
            for (from, to) in [(intermediate.certificate, "state/ca.pem"), (intermediate.key, "state/ca-key.pem"), (org.certificate, "state/chain.pem")] {
                try? FileManager.default.removeItem(atPath: dir.file(to))
                try FileManager.default.copyItem(atPath: from, toPath: dir.file(to))
            }
            chmod(dir.file("state/ca-key.pem"), 0o600)
        }
        let policies = """
            hosts:
              - match: "org.test"
                action: intercept
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
            """
        let mainConfig = Self.caConfig + "network:\n  allow: [127.0.0.0/8]\n"

        try install(first)
        let before = try ProxyHarness(policies: policies, mainConfig: mainConfig, directory: dir)
        #expect(try Curl.run("https://org.test/ok", proxy: before, caFile: org.certificate, directory: dir).status == 200)
        #expect(try Self.servedChain(proxyPort: before.port, host: "org.test", directory: dir).last?.subject == (try Self.subject(of: first.certificate)))
        before.process.stop()

        try install(second)
        let after = try ProxyHarness(policies: policies, mainConfig: mainConfig, directory: dir)
        let curl = try Curl.run("https://org.test/ok", proxy: after, caFile: org.certificate, directory: dir)
        #expect(curl.status == 200, "\(curl.stderr)")
        #expect(try Self.servedChain(proxyPort: after.port, host: "org.test", directory: dir).last?.subject == (try Self.subject(of: second.certificate)))
    }

    /// Each way the CA files can be wrong is refused by `check` at the
    /// position of the `ca:` key at fault, saying what to do.
    @Test(arguments: ["not a CA", "wrong key", "broken chain"])
    func checkRefusesCAFilesThatCannotMintTrustedLeaves(fault: String) throws {
        let dir = try TemporaryDirectory("pinproxy-intermediate-check")
        let org = try OrganisationRoot(in: dir)
        let other = try OrganisationRoot(in: dir, name: "other")
        let good = try org.makeIntermediate(named: "good")
        let notCA = try org.makeIntermediate(named: "leaflike", extensions: "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n")
        let stranger = try org.makeIntermediate(named: "stranger")
        let (certificate, key, chain): (String, String, String) = switch fault {
        case "not a CA": (notCA.certificate, notCA.key, org.certificate)
        case "wrong key": (good.certificate, stranger.key, org.certificate)
        default: (good.certificate, good.key, other.certificate)
        }
        try FileManager.default.createDirectory(atPath: dir.file("state"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: certificate, toPath: dir.file("state/ca.pem"))
        try FileManager.default.copyItem(atPath: key, toPath: dir.file("state/ca-key.pem"))
        chmod(dir.file("state/ca-key.pem"), 0o600)
        try FileManager.default.copyItem(atPath: chain, toPath: dir.file("state/chain.pem"))
        try dir.write("etc/pinproxy.yaml", Self.caConfig + "listen: 127.0.0.1:0\nadmin:\n  listen: 127.0.0.1:0\npolicies: policies\n")
        try dir.write("etc/policies/test.yaml", "hosts: []\n")

        let check = try PinproxyBinary.run(["check", "--config", dir.file("etc/pinproxy.yaml")])
        #expect(check.status == 1)
        let file = dir.file("etc/pinproxy.yaml")
        let expected = switch fault {
        case "not a CA": "\(file):2:9: error: the CA certificate CN=leaflike,O=Org is not a CA certificate (it needs basicConstraints CA:TRUE"
        case "wrong key": "\(file):3:8: error: the CA key does not belong to the CA certificate CN=good,O=Org: point ca.key at"
        default: "\(file):4:10: error: certificate 1 of the chain (CN=Org Root other,O=Org) did not sign CN=good,O=Org"
        }
        let output = check.stdout + check.stderr
        #expect(output.contains(expected), "\(output)")

        // `run` refuses the same, before it listens (stopped by its PID if it does not).
        let run = try ChildProcess(PinproxyBinary.path, ["run", "--config", file], directory: dir, name: "run")
        defer { run.stop() }
        #expect(run.waitForExit(timeout: 30) == 1, "\(run.outputText)")
        #expect(run.outputText.contains(expected), "\(run.outputText)")
    }

    /// A reload after the CA's files were replaced by a certificate that is no
    /// CA fails, saying why at the `ca.cert` position; the CA in memory goes on.
    @Test func aReloadRefusesACACertificateThatIsNoCA() throws {
        let dir = try TemporaryDirectory("pinproxy-intermediate-reload")
        let org = try OrganisationRoot(in: dir)
        let pki = try TestPKI.make(in: dir, names: ["org.test"])
        let upstream = try ScriptedUpstream(directory: dir, tls: (pki.chainFile, pki.leafKey))
        let good = try org.makeIntermediate(named: "good")
        let notCA = try org.makeIntermediate(named: "leaflike", extensions: "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n")
        try FileManager.default.createDirectory(atPath: dir.file("state"), withIntermediateDirectories: true)
        func install(_ intermediate: (certificate: String, key: String)) throws {
            for (from, to) in [(intermediate.certificate, "state/ca.pem"), (intermediate.key, "state/ca-key.pem"), (org.certificate, "state/chain.pem")] {
                try? FileManager.default.removeItem(atPath: dir.file(to))
                try FileManager.default.copyItem(atPath: from, toPath: dir.file(to))
            }
            chmod(dir.file("state/ca-key.pem"), 0o600)
        }
        try install(good)
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: "org.test"
                action: intercept
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 0
            """, mainConfig: Self.caConfig + "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        #expect(try Curl.run("https://org.test/ok", proxy: proxy, caFile: org.certificate, directory: dir).status == 200)

        try install(notCA)
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"
        let reload = try Curl.run("\(admin)/reload", proxyURL: nil, caFile: nil, extra: ["-X", "POST"], directory: dir)
        #expect(reload.status == 422, "\(reload.body)")
        #expect(reload.body.contains("the CA certificate CN=leaflike,O=Org is not a CA certificate"), "\(reload.body)")
        let document = try JSONSerialization.jsonObject(with: Data(reload.body.utf8)) as? [String: Any]
        let error = (document?["errors"] as? [[String: Any]])?.first
        #expect((error?["file"] as? String)?.hasSuffix("etc/pinproxy.yaml") == true, "\(reload.body)")
        // Line 3: the harness puts `listen:` first.
        #expect(error?["line"] as? Int == 3 && error?["column"] as? Int == 9, "\(reload.body)")
        let after = try Curl.run("https://org.test/ok", proxy: proxy, caFile: org.certificate, directory: dir)
        #expect(after.status == 200, "\(after.stderr)")
    }

    // MARK: Helpers

    /// The certificates the proxy sends for `host` on an intercepted CONNECT, as subjects.
    static func servedChain(proxyPort: Int, host: String, directory: TemporaryDirectory) throws -> [(subject: String, issuer: String)] {
        let (_, output, _) = try ChildProcess.runSeparately("openssl", [
            "s_client", "-proxy", "127.0.0.1:\(proxyPort)", "-connect", "\(host):443", "-servername", host, "-showcerts",
        ], input: "")
        // `-showcerts` prints ` N s:SUBJECT` and `   i:ISSUER` before each certificate sent.
        let lines = output.split(separator: "\n").map(String.init)
        var chain: [(subject: String, issuer: String)] = []
        for (index, line) in lines.enumerated() {
            guard let range = line.range(of: #"^ *\d+ s:"#, options: .regularExpression), index + 1 < lines.count else { continue }
            let issuer = lines[index + 1].trimmingCharacters(in: .whitespaces)
            chain.append((String(line[range.upperBound...]), issuer.hasPrefix("i:") ? String(issuer.dropFirst(2)) : issuer))
        }
        return chain
    }

    /// A subject as `openssl s_client` prints it (`O = Org, CN = x`).
    static func subject(of certificate: String) throws -> String {
        try ChildProcess.check("openssl", ["x509", "-in", certificate, "-noout", "-subject"])
            .trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "subject=", with: "")
    }
}

/// The organisation's root, made and used with the openssl CLI as a security
/// team would: it signs intermediates with pathlen:0 and keyCertSign.
struct OrganisationRoot {
    let directory: String
    let certificate: String
    let key: String
    static let intermediateExtensions = "basicConstraints=critical,CA:TRUE,pathlen:0\nkeyUsage=critical,keyCertSign,cRLSign\n"

    init(in dir: TemporaryDirectory, name: String = "org") throws {
        directory = dir.file(name)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        certificate = "\(directory)/root.pem"
        key = "\(directory)/root-key.pem"
        let subject = name == "org" ? "/O=Org/CN=Org Root" : "/O=Org/CN=Org Root \(name)"
        try ChildProcess.check("openssl", [
            "req", "-x509", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-keyout", key, "-out", certificate,
            "-days", "30", "-subj", subject,
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
    }

    /// `openssl x509 -req` on `request`, as the brief to the security team says.
    func sign(request: String, out: String, extensions: String = intermediateExtensions) throws {
        let extfile = "\(directory)/\(UUID().uuidString).ext"
        try extensions.write(toFile: extfile, atomically: true, encoding: .utf8)
        try ChildProcess.check("openssl", [
            "x509", "-req", "-in", request, "-CA", certificate, "-CAkey", key, "-CAcreateserial",
            "-out", out, "-days", "20", "-sha256", "-extfile", extfile,
        ])
    }

    /// An intermediate whose key the openssl CLI makes (subject `/O=Org/CN=NAME`).
    func makeIntermediate(named name: String, extensions: String = intermediateExtensions) throws -> (certificate: String, key: String) {
        let key = "\(directory)/\(name)-key.pem"
        try ChildProcess.check("openssl", [
            "req", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-keyout", key,
            "-out", "\(directory)/\(name).csr", "-subj", "/O=Org/CN=\(name)",
        ])
        try sign(request: "\(directory)/\(name).csr", out: "\(directory)/\(name).pem", extensions: extensions)
        return ("\(directory)/\(name).pem", key)
    }
}
