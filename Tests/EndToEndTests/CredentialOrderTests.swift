import Foundation
import PinproxyTestSupport
import Testing

/// docs/contract.md §15's order through the real binary and curl: the
/// credential (and `require_identity`) is judged before the host, so a client
/// without a valid credential gets 407 at a denied host as at any other, and
/// cannot map which hosts are denied (issue 27 item 8). CONNECT and
/// absolute-form alike.
@Suite("The credential is checked before the host", .blockingWaits, .serialized)
struct CredentialOrderTests {
    static let password = "order-S3CRET"
    static let policies = """
        hosts:
          - match: denied.test
            action: deny
        """

    static func proxy(_ clients: String, in dir: TemporaryDirectory) throws -> ProxyHarness {
        try ProxyHarness(policies: policies, mainConfig: "network:\n  allow: [127.0.0.0/8]\n" + clients, directory: dir)
    }

    static func curl(_ url: String, _ proxy: ProxyHarness, as user: String?, _ password: String?, in dir: TemporaryDirectory) throws -> CurlResult {
        let proxyURL = user.map { "http://\($0):\(password ?? "")@127.0.0.1:\(proxy.port)" } ?? proxy.proxyURL
        return try Curl.run(url, proxyURL: proxyURL, caFile: proxy.caFile, directory: dir)
    }

    /// The answer to CONNECT (https) and to an absolute-form request (http), as (status, X-Pinproxy-Error).
    static func answers(_ host: String, _ proxy: ProxyHarness, as user: String?, _ password: String?,
                        in dir: TemporaryDirectory) throws -> [String] {
        let connect = try curl("https://\(host)/", proxy, as: user, password, in: dir)
        let absolute = try curl("http://\(host)/", proxy, as: user, password, in: dir)
        return ["CONNECT \(connect.connectStatus) \(connect.pinproxyError ?? "-")",
                "absolute \(absolute.status) \(absolute.pinproxyError ?? "-")"]
    }

    @Test func aWrongCredentialGets407AtADeniedHostAndARightOneTheHostsAnswer() throws {
        let dir = try TemporaryDirectory("pinproxy-credential-order")
        let hash = try ClientIdentityTests.Stack.passwd(Self.password, ["--iterations", "10000"])
        let proxy = try Self.proxy("""
            clients:
              allow: [127.0.0.0/8]
              identities:
                billing: { password_hash: "\(hash)" }
            """, in: dir)
        let required = ["CONNECT 407 proxy_auth_required", "absolute 407 proxy_auth_required"]
        let denied = ["CONNECT 403 host_denied", "absolute 403 host_denied"]
        // A wrong password, a name nobody configured: 407, the same at a denied host
        // (by policy) and at a host no policy covers (default_action: deny).
        for host in ["denied.test", "nowhere.test"] {
            #expect(try Self.answers(host, proxy, as: "billing", "wrong", in: dir) == required, "\(host)")
            #expect(try Self.answers(host, proxy, as: "mallory", "x", in: dir) == required, "\(host)")
        }
        // The right credential, or none where none is required: the host's own answer.
        #expect(try Self.answers("denied.test", proxy, as: "billing", Self.password, in: dir) == denied)
        #expect(try Self.answers("denied.test", proxy, as: nil, nil, in: dir) == denied)
    }

    @Test func requireIdentityAnswers407BeforeTheHost() throws {
        let dir = try TemporaryDirectory("pinproxy-credential-order")
        let hash = try ClientIdentityTests.Stack.passwd(Self.password, ["--iterations", "10000"])
        let proxy = try Self.proxy("""
            clients:
              allow: [127.0.0.0/8]
              identities:
                billing: { password_hash: "\(hash)" }
              require_identity: true
            """, in: dir)
        let required = ["CONNECT 407 proxy_auth_required", "absolute 407 proxy_auth_required"]
        #expect(try Self.answers("denied.test", proxy, as: nil, nil, in: dir) == required)
        #expect(try Self.answers("nowhere.test", proxy, as: nil, nil, in: dir) == required)
        #expect(try Self.answers("denied.test", proxy, as: "billing", Self.password, in: dir)
                == ["CONNECT 403 host_denied", "absolute 403 host_denied"])
    }

    /// With no identity configured, no credential can be right: one sent is
    /// 407 at every host (as it was at an allowed host), and a client that
    /// sends none is answered as before.
    @Test func withNoIdentityConfiguredASentCredentialIs407Everywhere() throws {
        let dir = try TemporaryDirectory("pinproxy-credential-order")
        let proxy = try Self.proxy("clients:\n  allow: [127.0.0.0/8]\n", in: dir)
        #expect(try Self.answers("denied.test", proxy, as: "someone", "pw", in: dir)
                == ["CONNECT 407 proxy_auth_required", "absolute 407 proxy_auth_required"])
        #expect(try Self.answers("denied.test", proxy, as: nil, nil, in: dir)
                == ["CONNECT 403 host_denied", "absolute 403 host_denied"])
    }
}
