import Foundation
import PinproxyPolicy
import PinproxyTestSupport
import Testing

/// A refusal's body for a client that sent no credential names the code and
/// the fix, never the rule behind it (docs/contract.md §4, §15): no policy
/// file, line or identity name reaches an anonymous client; the operator
/// finds the rule in the access line's `detail`. In process: the refusal
/// comes before any upstream, so the policy's upstream is a port that refuses.
@Suite("refusals to anonymous clients", .blockingWaits)
struct AnonymousRefusalTests {
    @Test func the407ToAnAnonymousClientNamesTheFixAndTheLogKeepsTheRule() async throws {
        let closed = try RefusingPort()
        let hash = PasswordHash.make(password: "billing-pass", iterations: PasswordHash.minimumIterations).encoded
        let policies = """
            hosts:
              - match: api.spotify.test
                action: intercept
                upstream: 127.0.0.1:\(closed.port)
                upgrade_to_tls: true
                clients: [billing]
            """
        let main = InProcessProxy.loopbackAllowed + """
            clients:
              allow: [127.0.0.0/8]
              identities:
                billing:
                  password_hash: "\(hash)"
            """
        try await InProcessProxy.run(policies: policies, mainConfig: main) { proxy in
            // CONNECT: the body as sent (curl drops a CONNECT answer's body).
            let client = try RawClient(port: proxy.port)
            client.send("CONNECT api.spotify.test:443 HTTP/1.1\r\nHost: api.spotify.test:443\r\n\r\n")
            let (head, body) = client.readResponse()
            #expect(head.hasPrefix("HTTP/1.1 407 "), "\(head)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any], "\(body)")
            #expect(json["error"] as? String == "proxy_auth_required")
            let detail = try #require(json["detail"] as? String)
            #expect(detail.contains("Proxy-Authorization: Basic"), "the fix: \(detail)")
            for secret in ["billing", ".yaml", "admits", "policy"] {
                #expect(!body.contains(secret), "\(secret) leaked: \(body)")
            }
            // Absolute-form (HTTP_PROXY): the same body.
            let plain = try proxy.curl("http://api.spotify.test/v1/me")
            #expect(plain.status == 407)
            #expect(!plain.body.contains("billing") && !plain.body.contains(".yaml"), "\(plain.body)")

            // The rule is in the access log, for the operator.
            let lines = await proxy.waitForAccessLog(count: 2)
            let refused = lines.filter { $0["error"] == "proxy_auth_required" }
            #expect(refused.count == 2, "\(lines)")
            for line in refused {
                let logged = line["detail"] ?? ""
                #expect(logged.contains("admits only [billing]") && logged.contains("test.yaml"), "\(line)")
            }
        }
    }
}
