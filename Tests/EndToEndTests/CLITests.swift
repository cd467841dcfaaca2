import Foundation
import PinproxyTestSupport
import Testing

@Suite("pinproxy pin and pinproxy ca", .blockingWaits)
struct CLITests {
    @Test(arguments: TestPKI.KeyType.allCases)
    func pinPrintsTheOpenSSLRecipesPinForEveryCertificate(keyType: TestPKI.KeyType) throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir, keyType: keyType)
        let (status, out, err) = try PinproxyBinary.run(["pin", pki.chainFile, pki.rootCertificate])
        #expect(status == 0, "\(err)")
        let lines = out.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        let expected = try [pki.leafCertificate, pki.intermediateCertificate, pki.rootCertificate].map(TestPKI.opensslSPKIPin)
        #expect(lines.map { String($0.prefix { $0 != " " }) } == expected.map { "sha256/\($0)" })
        #expect(lines[0].contains("  subject=CN=localhost  issuer=CN=Test Intermediate pki \(keyType.rawValue),O=pinproxy tests  not_after=20"))
        #expect(lines[0].hasSuffix("Z"))
    }

    @Test func pinAsYAMLIsAListReadyToPaste() throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir)
        let (status, out, _) = try PinproxyBinary.run(["pin", "--format", "yaml", pki.chainFile])
        #expect(status == 0)
        let yamlFile = try dir.write("pins.yaml", "spki_sha256:\n" + out.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n") + "\n")
        let parsed = try ChildProcess.check("python3", ["-c", """
            import yaml, sys
            doc = yaml.safe_load(open(sys.argv[1]))
            for entry in doc["spki_sha256"]:
                print(entry["pin"], "|", entry["note"])
            """, yamlFile])
        let rows = parsed.split(separator: "\n")
        #expect(rows.count == 2)
        #expect(rows[0].hasPrefix(try TestPKI.opensslSPKIPin(pki.leafCertificate) + " | CN=localhost, expires 20"))
    }

    @Test func pinConnectPrintsYAMLReadyToPasteAndTextOnRequest() throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir, keyType: .rsa)
        let server = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
        defer { server.stop() }
        let target = "127.0.0.1:\(server.port)"
        let (status, out, err) = try PinproxyBinary.run(["pin", "--connect", target, "--servername", "localhost", "--ca-file", pki.rootCertificate])
        #expect(status == 0, "\(err)")
        #expect(err.contains("verification: ok (3 certificates to a trusted root)"))
        // The header is the one the runbook shows: target, (address), version and cipher.
        let header = try #require(out.split(separator: "\n").first.map(String.init))
        #expect(header.hasPrefix("# chain sent by \(target) (\(target)), TLSv1.3 TLS_"), "\(header)")
        #expect(Self.headerShape(header))
        let runbook = try String(contentsOfFile: Repository.path("docs/pin-rotation.md"), encoding: .utf8)
        let example = try #require(runbook.split(separator: "\n").first { $0.hasPrefix("# chain sent by ") })
        #expect(Self.headerShape(String(example)), "docs/pin-rotation.md's example: \(example)")

        // Pasted under spki_sha256 it parses, with each certificate's own notAfter.
        let yamlFile = try dir.write("pins.yaml", "spki_sha256:\n" + out.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n") + "\n")
        let parsed = try ChildProcess.check("python3", ["-c", """
            import yaml, sys
            for entry in yaml.safe_load(open(sys.argv[1]))["spki_sha256"]:
                print(entry["pin"], str(entry["not_after"]).replace("+00:00", "Z").replace(" ", "T"), entry["note"], sep="|")
            """, yamlFile])
        let rows = parsed.split(separator: "\n").map { $0.split(separator: "|").map(String.init) }
        let certificates = [pki.leafCertificate, pki.intermediateCertificate]
        #expect(rows.map { $0[0] } == (try certificates.map(TestPKI.opensslSPKIPin)))
        for (row, certificate) in zip(rows, certificates) {
            #expect(row[1] == (try Self.opensslNotAfter(certificate)), "\(row)")
            #expect(row[2].contains(", expires 20"))
        }
        // … and pinproxy itself accepts it as a policy's pins.
        try dir.write("etc/pinproxy.yaml", "policies: policies\n")
        let pasted = out.split(separator: "\n").map { "        " + $0 }.joined(separator: "\n")
        try dir.write("etc/policies/p.yaml", "hosts:\n  - match: localhost\n    upgrade_to_tls: true\n    pins:\n      spki_sha256:\n\(pasted)\n")
        let check = try PinproxyBinary.run(["check", "--config", dir.file("etc/pinproxy.yaml")])
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)")

        // --format text: the one-line form, no header.
        let text = try PinproxyBinary.run(["pin", "--connect", target, "--servername", "localhost", "--ca-file", pki.rootCertificate, "--format", "text"])
        #expect(text.status == 0)
        let pins = text.stdout.split(separator: "\n").map { String($0.prefix { $0 != " " }) }
        #expect(pins == (try certificates.map { "sha256/" + (try TestPKI.opensslSPKIPin($0)) }))
    }

    @Test func pinConnectFailsWhenTheChainDoesNotVerifyAndSaysWhatCanFixIt() throws {
        let dir = try TemporaryDirectory()
        let pki = try TestPKI.make(in: dir, keyType: .rsa)
        let server = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
        defer { server.stop() }
        // Not trusted: the chain is still shown; a ca_file could fix it.
        let untrusted = try PinproxyBinary.run(["pin", "--connect", "127.0.0.1:\(server.port)", "--servername", "localhost"])
        #expect(untrusted.status == 2)
        #expect(untrusted.stdout.components(separatedBy: "- pin: ").count == 3)
        #expect(untrusted.stderr.contains("verification: FAILED: unable to get local issuer certificate"))
        #expect(untrusted.stderr.contains("ca_file"))
        // The wrong name: no trust store fixes that, and the hint must not say one would.
        let wrongName = try PinproxyBinary.run([
            "pin", "--connect", "127.0.0.1:\(server.port)", "--servername", "other.example", "--ca-file", pki.rootCertificate,
        ])
        #expect(wrongName.status == 2)
        #expect(wrongName.stderr.contains("verification: FAILED: hostname mismatch"), "\(wrongName.stderr)")
        #expect(wrongName.stderr.contains("not valid for other.example"))
        #expect(!wrongName.stderr.contains("ca_file"))
    }

    /// `# chain sent by TARGET (ADDRESS:PORT), TLSv1.x CIPHER`.
    static func headerShape(_ line: String) -> Bool {
        line.range(of: #"^# chain sent by \S+ \((\d+\.\d+\.\d+\.\d+|\[[0-9a-f:]+\]):\d+\), TLSv1\.[23] [A-Z0-9_-]+$"#, options: .regularExpression) != nil
    }

    /// The certificate's notAfter as RFC 3339 UTC, from the openssl CLI.
    static func opensslNotAfter(_ certificate: String) throws -> String {
        let text = try ChildProcess.check("openssl", ["x509", "-in", certificate, "-noout", "-enddate", "-dateopt", "iso_8601"])
        // notAfter=2027-11-23 20:35:00Z
        let value = text.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "notAfter=", with: "")
        return value.replacingOccurrences(of: " ", with: "T")
    }

    @Test func pinConnectToNothingFailsWithAReason() throws {
        // Port 1 on loopback: nothing listens there on a test machine.
        let (status, _, err) = try PinproxyBinary.run(["pin", "--connect", "127.0.0.1:1"])
        #expect(status == 1)
        #expect(err.contains("pinproxy pin: 127.0.0.1:1: cannot connect: 127.0.0.1:1 connection refused"), "\(err)")
        #expect(!err.contains("SingleConnectionFailure"))
    }

    @Test func caInitShowAndExport() throws {
        let dir = try TemporaryDirectory()
        let location = ["--ca-cert", dir.file("state/ca.pem"), "--ca-key", dir.file("state/ca-key.pem")]
        let created = try PinproxyBinary.run(["ca", "init"] + location)
        #expect(created.status == 0, "\(created.stderr)")
        #expect(created.stdout.contains("created"))
        #expect(TextFile.permissions(dir.file("state/ca-key.pem")) == 0o600)

        let again = try PinproxyBinary.run(["ca", "init"] + location)
        #expect(again.status == 0 && again.stdout.contains("nothing changed"))

        let shown = try PinproxyBinary.run(["ca", "show"] + location)
        let fingerprint = try ChildProcess.check("openssl", ["x509", "-in", dir.file("state/ca.pem"), "-noout", "-fingerprint", "-sha256"])
            .split(separator: "=", maxSplits: 1)[1].trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(shown.stdout.contains("sha256:      \(fingerprint)"))
        #expect(shown.stdout.contains("pin:         sha256/\(try TestPKI.opensslSPKIPin(dir.file("state/ca.pem")))"))
        #expect(shown.stdout.contains("not_after:   20"))

        let exported = try PinproxyBinary.run(["ca", "export", "--out", dir.file("trust.pem")] + location)
        #expect(exported.status == 0)
        #expect(try String(contentsOfFile: dir.file("trust.pem"), encoding: .utf8) == String(contentsOfFile: dir.file("state/ca.pem"), encoding: .utf8))

        chmod(dir.file("state/ca-key.pem"), 0o640)
        let refused = try PinproxyBinary.run(["ca", "init"] + location)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("CA key \(dir.file("state/ca-key.pem")) is readable by group or others (mode 640); run: chmod 600"))
    }

    /// Showing needs the certificate alone: the trust guide has client owners
    /// run `ca show --ca-cert FILE` where no key exists (issue 28 item 15).
    @Test func caShowReadsOnlyTheCertificate() throws {
        let dir = try TemporaryDirectory()
        let created = try PinproxyBinary.run(["ca", "init", "--ca-cert", dir.file("state/ca.pem"), "--ca-key", dir.file("state/ca-key.pem")])
        #expect(created.status == 0, "\(created.stderr)")
        try FileManager.default.copyItem(atPath: dir.file("state/ca.pem"), toPath: dir.file("given.pem"))
        try FileManager.default.removeItem(atPath: dir.file("state"))
        let shown = try PinproxyBinary.run(["ca", "show", "--ca-cert", dir.file("given.pem")], currentDirectory: dir.path)
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains("pin:         sha256/\(try TestPKI.opensslSPKIPin(dir.file("given.pem")))"), "\(shown.stdout)")
        #expect(!shown.stderr.contains("key"), "\(shown.stderr)")
    }
}

extension CLITests {
    @Test func caPathsComeFromTheConfigRelativeToItsFile() throws {
        let dir = try TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: dir.file("conf/policies"), withIntermediateDirectories: true)
        try dir.write("conf/pinproxy.yaml", "ca:\n  cert: ../pki/ca.pem\n  key: ../pki/ca-key.pem\npolicies: policies\n")
        let created = try PinproxyBinary.run(["ca", "init", "--config", dir.file("conf/pinproxy.yaml")])
        #expect(created.status == 0, "\(created.stderr)")
        #expect(FileManager.default.fileExists(atPath: dir.file("pki/ca-key.pem")))

        try dir.write("conf/bad.yaml", "ca:\n  certificate: x.pem\n")
        let bad = try PinproxyBinary.run(["ca", "show", "--config", dir.file("conf/bad.yaml")])
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("bad.yaml:2:3: error: unknown key `certificate`"), "\(bad.stderr)")
    }
}
