import Foundation
import PinproxyTestSupport
import Testing

/// A refusal's body for a client that sent no credential names the code and
/// the fix, never the rule behind it (docs/contract.md §4, §15): no policy
/// file, line or identity name reaches an anonymous client; the operator
/// finds the rule in the access line's `detail`.
@Suite("refusals to anonymous clients", .blockingWaits, .serialized)
struct AnonymousRefusalTests {
    @Test func the407ToAnAnonymousClientNamesTheFixAndTheLogKeepsTheRule() async throws {
        let stack = try await ClientIdentityTests.Stack()
        // CONNECT: the body as sent (curl drops a CONNECT answer's body).
        let raw = try stack.rawConnect("api.spotify.test", as: nil, nil)
        #expect(raw.status == 407)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(raw.body.utf8)) as? [String: Any], "\(raw.body)")
        #expect(json["error"] as? String == "proxy_auth_required")
        let detail = try #require(json["detail"] as? String)
        #expect(detail.contains("Proxy-Authorization: Basic"), "the fix: \(detail)")
        for secret in ["billing", ".yaml", "admits", "policy"] {
            #expect(!raw.body.contains(secret), "\(secret) leaked: \(raw.body)")
        }
        // Absolute-form (HTTP_PROXY): the same body.
        let plain = try stack.curl("http://api.spotify.test/v1/me", as: nil, nil)
        #expect(plain.status == 407)
        #expect(!plain.body.contains("billing") && !plain.body.contains(".yaml"), "\(plain.body)")

        // The rule is in the access log, for the operator.
        let lines = stack.proxy.waitForAccessLog(count: 2)
        let refused = lines.filter { $0["error"] as? String == "proxy_auth_required" }
        #expect(refused.count == 2, "\(lines)")
        for line in refused {
            let logged = line["detail"] as? String ?? ""
            #expect(logged.contains("admits only [billing]") && logged.contains("test.yaml"), "\(line)")
        }
    }
}
