import Foundation
import PinproxyTestSupport
import Testing

/// docs/contract.md §15 through the real binary and real clients that put
/// credentials in the proxy URL (curl, Python requests, Go): who may go
/// where, 407 and 403, failures counted and rate-limited, the token only
/// for the admitted identity, `from:`.
@Suite("Client identities end to end", .blockingWaits, .serialized)
struct ClientIdentityTests {
    static let billingPassword = "billing-S3CRET"
    static let reportsPassword = "reports-pw:with-colon"

    final class Stack: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let accounts: MockAccounts
        let api: MockWebAPI
        let upstream: TestUpstream
        let proxy: ProxyHarness

        init() async throws {
            dir = try TemporaryDirectory("pinproxy-identities")
            pki = try TestPKI.make(in: dir, names: ["accounts.spotify.test", "api.spotify.test", "open.test"])
            accounts = try await MockAccounts(chainFile: pki.chainFile, keyFile: pki.leafKey)
            api = try await MockWebAPI(chainFile: pki.chainFile, keyFile: pki.leafKey, accounts: accounts)
            upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
            try dir.write("secret.txt", accounts.clientSecret + "\n")
            // The hashes come from `pinproxy passwd` itself (billing at the default work factor).
            let billingHash = try Self.passwd(ClientIdentityTests.billingPassword, [])
            #expect(billingHash.hasPrefix("$pbkdf2-sha256$i=150000$"))
            try dir.write("reports.hash", try Self.passwd(ClientIdentityTests.reportsPassword, ["--iterations", "20000"]) + "\n")
            let pin = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
            let pins = Scenario.pins(pin, Scenario.backupPin)
            proxy = try ProxyHarness(policies: Scenario.policies([
                .intercept("accounts.spotify.test", upstream: .port(accounts.port), pins),
                .intercept("api.spotify.test", upstream: .port(api.port), "upgrade_to_tls: true", pins, "auth: { spotify: app }", "clients: [billing]"),
                .intercept("open.test", upstream: .port(upstream.port), "upgrade_to_tls: true", pins, "clients: [reports, billing]"),
            ], caFile: pki.rootCertificate), mainConfig: """
                network:
                  allow: [127.0.0.0/8]
                clients:
                  allow: [127.0.0.0/8]
                  identities:
                    billing:
                      password_hash: "\(billingHash)"
                      from: [127.0.0.1/32, 127.0.0.3/32]
                    reports:
                      password_hash_file: ../reports.hash
                spotify:
                  accounts: https://accounts.spotify.test
                  sessions:
                    app:
                      client_id: \(accounts.clientID)
                      client_secret_file: ../secret.txt
                """, directory: dir)
        }

        static func passwd(_ password: String, _ arguments: [String]) throws -> String {
            let (status, stdout, stderr) = try ChildProcess.runSeparately(PinproxyBinary.path, ["passwd"] + arguments, input: password + "\n")
            guard status == 0 else { throw TestSupportError("pinproxy passwd: \(stderr)") }
            return stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func proxyURL(_ user: String?, _ password: String?) -> String {
            guard let user, let password else { return proxy.proxyURL }
            let escaped = password.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? password
            return "http://\(user):\(escaped)@127.0.0.1:\(proxy.port)"
        }

        func curl(_ url: String, as user: String?, _ password: String?, _ extra: [String] = []) throws -> CurlResult {
            try Curl.run(url, proxyURL: proxyURL(user, password), caFile: proxy.caFile, extra: extra, directory: dir)
        }

        func metrics() throws -> PrometheusText {
            let scrape = try Curl.run("http://127.0.0.1:\(try proxy.adminPort)/metrics", proxyURL: nil, caFile: nil, directory: dir)
            return try PrometheusText(parsing: scrape.body)
        }

        /// A CONNECT written by hand from `source` (a loopback address), for
        /// the refusal's JSON body (curl does not keep a CONNECT answer's body).
        func rawConnect(_ host: String, as user: String?, _ password: String?, from source: String = "127.0.0.1") throws -> (status: Int, headers: String, body: String) {
            let script = try dir.write("connect.py", """
                import base64, socket, sys
                port, source, host, user, password = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
                s = socket.create_connection(("127.0.0.1", port), source_address=(source, 0), timeout=20)
                auth = "" if user == "-" else "Proxy-Authorization: Basic %s\\r\\n" % base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
                s.sendall(("CONNECT %s:443 HTTP/1.1\\r\\nHost: %s:443\\r\\n%s\\r\\n" % (host, host, auth)).encode())
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk: break
                    data += chunk
                sys.stdout.write(data.decode())
                """)
            let (status, output) = try ChildProcess.run("/usr/bin/python3", [script, String(proxy.port), source, host, user ?? "-", password ?? "-"])
            guard status == 0, let split = output.range(of: "\r\n\r\n") else { throw TestSupportError("raw CONNECT failed: \(output)") }
            let head = String(output[..<split.lowerBound])
            let code = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
            return (code, head, String(output[split.upperBound...]))
        }
    }

    @Test func anIdentityIsAdmittedToItsHostAndRefusedAnotherAndOnlyItGetsTheToken() async throws {
        let stack = try await Stack()
        // billing: admitted to api.spotify.test, and the token is attached.
        let billing = try stack.curl("https://api.spotify.test/v1/me", as: "billing", Self.billingPassword)
        #expect(billing.status == 200, "\(billing.body) \(billing.stderr)")
        #expect(stack.api.authorizationHeaders.last??.hasPrefix("Bearer ") == true)
        let seenBefore = stack.api.seen.count

        // reports: a known identity the policy does not name: 403 client_denied,
        // and the Web API sees nothing (no request, so no token).
        let reports = try stack.curl("https://api.spotify.test/v1/me", as: "reports", Self.reportsPassword)
        #expect(reports.connectStatus == 403)
        #expect(reports.pinproxyError == "client_denied")
        let raw = try stack.rawConnect("api.spotify.test", as: "reports", Self.reportsPassword)
        #expect(raw.status == 403)
        #expect(raw.body.contains("policy api.spotify.test"), "\(raw.body)")
        #expect(raw.body.contains("admits only [billing]"), "\(raw.body)")
        #expect(raw.body.contains("identity reports is not among them"), "\(raw.body)")
        // The same through HTTP_PROXY (absolute-form, upgraded to TLS upstream).
        let plain = try stack.curl("http://api.spotify.test/v1/me", as: "reports", Self.reportsPassword)
        #expect(plain.status == 403)
        #expect(plain.pinproxyError == "client_denied")
        #expect(stack.api.seen.count == seenBefore, "a refused client must never reach the upstream")
        let plainBilling = try stack.curl("http://api.spotify.test/v1/me", as: "billing", Self.billingPassword)
        #expect(plainBilling.status == 200, "\(plainBilling.body)")
        #expect(stack.api.seen.count == seenBefore + 1)
        #expect(stack.api.authorizationHeaders.last??.hasPrefix("Bearer ") == true)

        // reports on its own host: admitted; that policy attaches no token, and
        // Proxy-Authorization never goes upstream (inside the session or absolute-form).
        for url in ["https://open.test/echo", "http://open.test/echo"] {
            let open = try stack.curl(url, as: "reports", Self.reportsPassword)
            #expect(open.status == 200, "\(url): \(open.body)")
            #expect(!open.body.lowercased().contains("proxy-authorization"), "\(open.body)")
            #expect(!open.body.lowercased().contains("bearer"), "\(open.body)")
        }
        // billing is listed on open.test too.
        #expect(try stack.curl("https://open.test/echo", as: "billing", Self.billingPassword).status == 200)

        // The access log names the identity; the metrics carry it as `client`.
        let lines = stack.proxy.waitForAccessLog(count: 7)
        let identities = lines.compactMap { $0["identity"] as? String }
        #expect(identities.contains("billing") && identities.contains("reports"), "\(identities)")
        let metrics = try stack.metrics()
        #expect(metrics.value("pinproxy_denied_total", ["reason": "client_denied", "client": "reports"]) == 3,
                "\(metrics.matching("pinproxy_denied_total")) \(metrics.matching("pinproxy_requests_total"))")
        // Summed over `protocol`: curl speaks HTTP/2 inside the session where it can.
        #expect(metrics.matching("pinproxy_requests_total", ["host": "api.spotify.test", "code": "200", "client": "billing"])
            .map(\.value).reduce(0, +) >= 2)
        // No password, nor the base64 of a credential, in any log line.
        let credential = Data("reports:\(Self.reportsPassword)".utf8).base64EncodedString()
        #expect(!stack.proxy.log.contains(Self.reportsPassword) && !stack.proxy.log.contains(credential))
    }

    @Test func noCredentialGets407AndAClientWithCredentialsRetries() async throws {
        let stack = try await Stack()
        let anonymous = try stack.curl("https://api.spotify.test/v1/me", as: nil, nil)
        #expect(anonymous.connectStatus == 407)
        #expect(anonymous.pinproxyError == "proxy_auth_required")
        #expect(anonymous.headers["proxy-authenticate"] == "Basic realm=\"pinproxy\"")
        let anonymousPlain = try stack.curl("http://api.spotify.test/v1/me", as: nil, nil)
        #expect(anonymousPlain.status == 407)
        #expect(anonymousPlain.headers["proxy-authenticate"] == "Basic realm=\"pinproxy\"")

        // --proxy-anyauth: curl first asks without credentials, reads the 407's
        // Proxy-Authenticate, and asks again with Basic.
        let retried = try stack.curl("https://api.spotify.test/v1/me", as: "billing", Self.billingPassword, ["--proxy-anyauth", "-v"])
        #expect(retried.status == 200, "\(retried.stderr)")
        #expect(retried.stderr.contains("407"), "curl must have seen the 407 first: \(retried.stderr)")
        #expect(retried.stderr.contains("Proxy-Authorization: Basic"))
    }

    @Test func aWrongPasswordIsCountedAndRateLimitedPerAddress() async throws {
        let stack = try await Stack()
        let from3 = ["--interface", "127.0.0.3"]
        for attempt in 1...10 {
            let wrong = try stack.curl("https://open.test/echo", as: "reports", "not-the-password", from3)
            #expect(wrong.connectStatus == 407, "attempt \(attempt)")
            #expect(wrong.pinproxyError == "proxy_auth_required")
        }
        // The 11th from that address is refused before any password work, even a right one.
        let limited = try stack.curl("https://open.test/echo", as: "reports", Self.reportsPassword, from3)
        #expect(limited.connectStatus == 429)
        #expect(limited.pinproxyError == "proxy_auth_required")
        #expect(Int(limited.headers["retry-after"] ?? "") ?? 0 > 0)
        // Another address is not affected.
        #expect(try stack.curl("https://open.test/echo", as: "reports", Self.reportsPassword).status == 200)
        // A name nobody configured is counted as `_unknown`, never by the name sent.
        let unknown = try stack.curl("https://open.test/echo", as: "mallory", "x", ["--interface", "127.0.0.4"])
        #expect(unknown.connectStatus == 407)

        let metrics = try stack.metrics()
        #expect(metrics.value("pinproxy_proxy_auth_failures_total", ["client": "reports"]) == 10)
        #expect(metrics.value("pinproxy_proxy_auth_failures_total", ["client": "_unknown"]) == 1)
        #expect(metrics.value("pinproxy_denied_total", ["reason": "proxy_auth_required", "client": "_anonymous"]) == 12)
        #expect(!metrics.samples.contains { $0.labels.values.contains("mallory") })
        #expect(!stack.proxy.log.contains("not-the-password"))
    }

    @Test func fromRefusesTheRightIdentityFromTheWrongNetwork() async throws {
        let stack = try await Stack()
        #expect(try stack.curl("https://open.test/echo", as: "billing", Self.billingPassword).status == 200)
        let elsewhere = try stack.curl("https://open.test/echo", as: "billing", Self.billingPassword, ["--interface", "127.0.0.2"])
        #expect(elsewhere.connectStatus == 403)
        #expect(elsewhere.pinproxyError == "client_denied")
        let raw = try stack.rawConnect("open.test", as: "billing", Self.billingPassword, from: "127.0.0.2")
        #expect(raw.body.contains("identity billing may connect only from 127.0.0.1/32, 127.0.0.3/32"), "\(raw.body)")
        // reports has no `from:`: the same address is fine for it.
        #expect(try stack.curl("https://open.test/echo", as: "reports", Self.reportsPassword, ["--interface", "127.0.0.2"]).status == 200)
    }

    /// Absolute-form with a credential not yet cached: the password check runs
    /// off the event loop while the request's body and a pipelined second
    /// request wait; both are answered, in order.
    @Test func absoluteFormRequestsWaitForTheirPasswordCheckAndLoseNothing() async throws {
        let stack = try await Stack()
        let script = try stack.dir.write("pipelined.py", """
            import base64, socket, sys
            port, user, password = int(sys.argv[1]), sys.argv[2], sys.argv[3]
            auth = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
            body = b"x" * 5000
            first = (b"POST http://open.test/echo HTTP/1.1\\r\\nHost: open.test\\r\\nProxy-Authorization: Basic " + auth.encode()
                     + b"\\r\\nContent-Length: 5000\\r\\n\\r\\n" + body)
            second = (b"GET http://open.test/echo?second HTTP/1.1\\r\\nHost: open.test\\r\\nProxy-Authorization: Basic " + auth.encode()
                      + b"\\r\\nConnection: close\\r\\n\\r\\n")
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(first + second)
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk: break
                data += chunk
            sys.stdout.write(data.decode(errors="replace"))
            """)
        let (status, output) = try ChildProcess.run("python3", [script, String(stack.proxy.port), "reports", Self.reportsPassword])
        #expect(status == 0, "\(output)")
        #expect(output.components(separatedBy: "HTTP/1.1 200").count == 3, "two answers expected: \(output)")
        #expect(output.contains("\"body_bytes\": 5000"), "the POST's body reached the upstream: \(output)")
        let lines = stack.proxy.waitForAccessLog(count: 2)
        #expect(lines.filter { ($0["identity"] as? String) == "reports" && ($0["status"] as? Int) == 200 }.count == 2)
    }

    @Test func pythonRequestsWithCredentialsInTheProxyURL() async throws {
        let stack = try await Stack()
        let script = try stack.dir.write("client.py", """
            import sys, requests
            proxy, ca = sys.argv[1], sys.argv[2]
            proxies = {"http": proxy, "https": proxy}
            try:
                r = requests.get("https://api.spotify.test/v1/me", proxies=proxies, verify=ca, timeout=30)
                print("https", r.status_code, r.json().get("id"))
            except requests.exceptions.ProxyError as e:
                print("https refused", "403" in str(e))
            r = requests.get("http://api.spotify.test/v1/me", proxies=proxies, timeout=30)
            print("http", r.status_code, r.headers.get("X-Pinproxy-Error"))
            try:
                requests.get("https://open.test/echo", proxies=proxies, verify=ca, timeout=30)
                print("open admitted")
            except requests.exceptions.ProxyError as e:
                print("open refused", "403" in str(e))
            """)
        let billing = try ChildProcess.run("python3", [script, stack.proxyURL("billing", Self.billingPassword), stack.proxy.caFile])
        #expect(billing.output.contains("https 200 mock-user"), "\(billing.output)")
        #expect(billing.output.contains("http 200 None"), "\(billing.output)")
        #expect(billing.output.contains("open admitted"), "\(billing.output)")
        let reports = try ChildProcess.run("python3", [script, stack.proxyURL("reports", Self.reportsPassword), stack.proxy.caFile])
        #expect(reports.output.contains("https refused True"), "\(reports.output)")
        #expect(reports.output.contains("http 403 client_denied"), "\(reports.output)")
        #expect(reports.output.contains("open admitted"), "\(reports.output)")
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/go"), "go is not installed"))
    func goWithCredentialsInTheProxyURL() async throws {
        let stack = try await Stack()
        let source = try stack.dir.write("client/main.go", """
            package main

            import (
            \t"crypto/tls"
            \t"crypto/x509"
            \t"fmt"
            \t"net/http"
            \t"net/url"
            \t"os"
            )

            func main() {
            \tproxy, _ := url.Parse(os.Args[1])
            \tpem, _ := os.ReadFile(os.Args[2])
            \tpool := x509.NewCertPool()
            \tpool.AppendCertsFromPEM(pem)
            \tclient := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxy), TLSClientConfig: &tls.Config{RootCAs: pool}}}
            \tresp, err := client.Get(os.Args[3])
            \tif err != nil {
            \t\tfmt.Println("error:", err)
            \t\treturn
            \t}
            \tfmt.Println("status:", resp.StatusCode)
            }
            """)
        func run(_ user: String, _ password: String, _ url: String) throws -> String {
            try ChildProcess.run("/usr/bin/go", ["run", source, stack.proxyURL(user, password), stack.proxy.caFile, url],
                                 currentDirectory: stack.dir.path).output
        }
        #expect(try run("billing", Self.billingPassword, "https://api.spotify.test/v1/me").contains("status: 200"))
        let refused = try run("reports", Self.reportsPassword, "https://api.spotify.test/v1/me")
        #expect(refused.contains("Forbidden") || refused.contains("403"), "\(refused)")
    }
}
