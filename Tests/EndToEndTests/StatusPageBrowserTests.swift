import Foundation
import PinproxyTestSupport
import Testing

/// Debian's chromium, headless (scripts/install-deps installs it).
enum Chromium {
    static let path: String? = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static var missingMessage: Comment { "chromium is not installed (apt-get install chromium); skipping" }

    /// Runs headless chromium on `url` with `arguments`; its profile and crash
    /// files stay inside `directory`. No sandbox: tests often run as root.
    /// Tests stay on loopback: chromium's own background requests (update
    /// and account checks, which the switches above do not all stop) resolve
    /// no name, so nothing leaves this machine; the page is on 127.0.0.1.
    static func run(_ url: String, _ arguments: [String], directory: TemporaryDirectory) throws -> (status: Int32, stdout: String, stderr: String) {
        try ChildProcess.runSeparately(path!, [
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-domain-reliability", "--no-pings", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            "--user-data-dir=\(directory.file("chromium-profile"))",
        ] + arguments + [url], environment: ["HOME": directory.path, "PATH": "/usr/bin:/bin"], timeout: 120)
    }
}

/// The status page (docs/contract.md §13) as a real browser renders it: every
/// policy, one timeline bar per pin, the warning for the host about to lose
/// its backup pin, no secret, nothing fetched from anywhere but the page.
@Suite("Status page in a browser", .blockingWaits, .enabled(if: Chromium.path != nil, Chromium.missingMessage))
struct StatusPageBrowserTests {
    static let secret = "client-secret-Zq8XvL2-never-shown"

    @Test func theRenderedPageShowsEveryPolicyAndTheTimelineAndNoSecret() async throws {
        let dir = try TemporaryDirectory("pinproxy-status-page")
        let pki = try TestPKI.make(in: dir, names: ["api.test", "report.test", "backup.test", "refused.test"])
        let upstream = try OpenSSLServer(directory: dir, certificate: pki.leafCertificate, key: pki.leafKey, chain: pki.intermediateCertificate)
        defer { upstream.stop() }
        let intermediate = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
        let root = try TestPKI.opensslSPKIPin(pki.rootCertificate)
        let formatter = ISO8601DateFormatter()
        let soon = formatter.string(from: Date() + 12 * 86_400)
        try dir.write("secret.txt", Self.secret + "\n")
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: api.test
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                probe_interval: 1s
                pins:
                  spki_sha256:
                    - { pin: "\(intermediate)", note: "test intermediate" }
                    - { pin: "\(root)", note: "test root" }
              - match: backup.test
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                pins:
                  spki_sha256:
                    - { pin: "\(intermediate)", note: "stays" }
                    - { pin: "\(root)", not_after: \(soon), note: "the backup, expiring soon" }
              - match: report.test
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                pins:
                  mode: report
                  spki_sha256: [{pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}, {pin: "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="}]
              - match: refused.test
                upstream: 127.0.0.1:\(upstream.port)
                tls: { ca_file: \(pki.rootCertificate) }
                pins:
                  spki_sha256: [{pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}, {pin: "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="}]
              - match: "*.tunnel.test"
                action: tunnel
              - match: blocked.test
                action: deny
            """, mainConfig: """
            network:
              allow: [127.0.0.0/8]
            spotify:
              accounts: https://accounts.spotify.test
              sessions:
                app:
                  flow: client_credentials
                  client_id: status-page-client
                  client_secret_file: ../secret.txt
            """, directory: dir)
        let admin = "http://127.0.0.1:\(try proxy.adminPort)"
        // Report-mode traffic: a verdict to count and a chain to remember.
        let served = try Curl.run("https://report.test/", proxy: proxy, directory: dir)
        #expect(served.status == 200, "\(served.stderr)")
        // An enforced mismatch: the page must lead with it, in red.
        let refused = try Curl.run("https://refused.test/", proxy: proxy, directory: dir)
        #expect(refused.pinproxyError == "pin_mismatch", "\(refused.status)")
        #expect(try await pollUntil(timeout: 15, every: 0.2) {
            try Curl.run("\(admin)/policies", proxyURL: nil, caFile: nil, directory: dir).body.contains("\"success\":true")
        }, "api.test was probed")

        let page = try Curl.run("\(admin)/", proxyURL: nil, caFile: nil, directory: dir)
        #expect(page.status == 200)
        #expect(page.headers["content-type"]?.hasPrefix("text/html") == true)
        let csp = try #require(page.headers["content-security-policy"])
        #expect(csp.contains("default-src 'none'"), "nothing may load: \(csp)")
        #expect(!csp.contains("script-src"), "the page has no script")

        let netLog = dir.file("netlog.json")
        let dump = try Chromium.run("\(admin)/", ["--dump-dom", "--log-net-log=\(netLog)"], directory: dir)
        try #require(dump.status == 0, "chromium --dump-dom: \(dump.stderr.suffix(2000))")
        let dom = dump.stdout
        for pattern in ["api.test", "backup.test", "report.test", "refused.test", "*.tunnel.test", "blocked.test"] {
            #expect(dom.contains("data-policy=\"\(pattern)\""), "\(pattern) is on the page")
        }
        for (pattern, pins) in [("api.test", 2), ("backup.test", 2), ("report.test", 2)] {
            let article = try #require(Self.article(pattern, in: dom))
            #expect(article.components(separatedBy: "data-kind=\"pin\"").count - 1 == pins, "\(pattern): one bar per pin")
            #expect(article.contains("data-kind=\"today\""), "\(pattern): today is marked")
        }
        let failing = try #require(dom.range(of: "data-kind=\"failing\""), "a failing-now block")
        #expect(failing.lowerBound < (try #require(dom.range(of: "id=\"hosts\""))).lowerBound, "above the host cards")
        #expect(dom[failing.lowerBound...].prefix(600).contains("data-failing=\"refused.test\""), "refused.test leads")
        #expect(dom.contains("class=\"host failing\" data-policy=\"refused.test\""))
        #expect(!dom.contains("data-failing=\"api.test\""), "a host that serves is not failing")
        let backup = try #require(Self.article("backup.test", in: dom))
        #expect(backup.contains("data-kind=\"timeline-warning\""), "backup.test is about to lose its backup pin")
        #expect(backup.contains("data-kind=\"warning\""), "the stretch with one pin is shaded")
        #expect(!(try #require(Self.article("api.test", in: dom))).contains("timeline-warning"))
        #expect(try #require(Self.article("report.test", in: dom)).contains("mismatch_reported 1"), "the verdict is counted")
        #expect(dom.contains("data-session=\"app\""), "the Spotify session is listed")
        #expect(!dom.contains(Self.secret) && !page.body.contains(Self.secret), "the client secret never reaches the page")

        // Nothing but the page itself: no URL in the document at all, and the
        // browser's network log shows the page asking for nothing elsewhere.
        let urls = Self.urls(in: dom)
        #expect(urls.isEmpty, "URLs in the page: \(urls)")
        let requested = try Self.pageRequests(netLog: netLog, page: admin)
        #expect(requested.contains("\(admin)/"), "the navigation is in the log")
        #expect(Set(requested.map(Self.origin)) == [admin], "the page asked for: \(requested)")

        let screenshot = dir.file("status-page.png")
        let shot = try Chromium.run("\(admin)/", ["--screenshot=\(screenshot)", "--window-size=1100,1500", "--hide-scrollbars"], directory: dir)
        #expect(shot.status == 0, "\(shot.stderr.suffix(2000))")
        let png = try Data(contentsOf: URL(fileURLWithPath: screenshot))
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "a PNG")
        // Kept for a person to look at (docs/images/status-page.png is one such).
        let kept = Repository.path(".build/status-page.png")
        try? FileManager.default.removeItem(atPath: kept)
        try? FileManager.default.copyItem(atPath: screenshot, toPath: kept)
    }

    /// The `<article>` of one policy.
    static func article(_ pattern: String, in dom: String) -> String? {
        guard let start = dom.range(of: "data-policy=\"\(pattern)\"") else { return nil }
        let rest = dom[start.lowerBound...]
        guard let end = rest.range(of: "</article>") else { return nil }
        return String(rest[..<end.upperBound])
    }

    /// The URLs the page asked for, from chromium's network log: every request
    /// started with the page as its initiator, and the navigation to it. The
    /// browser's own background requests (update checks, account lookups) have
    /// no initiator and are not the page's. (Checked by hand: an `<img>` to
    /// another origin shows up here with the page's origin as initiator.)
    static func pageRequests(netLog: String, page: String) throws -> [String] {
        var text = try String(contentsOfFile: netLog, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        // A log cut short at exit lacks its closing brackets.
        if !text.hasSuffix("}") { text = text.trimmingCharacters(in: CharacterSet(charactersIn: ",")) + "]}" }
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let types = try #require((object["constants"] as? [String: Any])?["logEventTypes"] as? [String: Int])
        let start = try #require(types["URL_REQUEST_START_JOB"])
        let events = try #require(object["events"] as? [[String: Any]], "no events in the net log")
        return events.compactMap { event -> String? in
            guard event["type"] as? Int == start, let params = event["params"] as? [String: Any],
                  let url = params["url"] as? String else { return nil }
            return params["initiator"] as? String == page || url.hasPrefix(page + "/") ? url : nil
        }
    }

    static func urls(in text: String) -> [String] {
        let regex = try! NSRegularExpression(pattern: #"https?://[A-Za-z0-9.\-\[\]:]+[^\s"'<>]*"#)
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { String(text[Range($0.range, in: text)!]) }
    }

    static func origin(_ url: String) -> String {
        guard let components = URLComponents(string: url), let scheme = components.scheme, let host = components.host else { return url }
        return "\(scheme)://\(host)" + (components.port.map { ":\($0)" } ?? "")
    }
}
