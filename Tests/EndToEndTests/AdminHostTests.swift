import Foundation
import PinproxyTestSupport
import Testing

/// The admin API answers only to its own names (docs/contract.md §5): a page
/// that rebinds its DNS name to 127.0.0.1 can neither read `/policies` nor
/// drive `POST /reload`; names in `admin.hosts` are answered; a cross-site
/// POST is refused. Through the real binary, with curl.
@Suite("admin API Host and Origin checks", .blockingWaits)
struct AdminHostTests {
    @Test func aRebindingHostIsRefusedAndConfiguredNamesAreAnswered() throws {
        let dir = try TemporaryDirectory("pinproxy-admin-host")
        let proxy = try ProxyHarness(policies: "hosts: []\n", mainConfig: """
            listen: 127.0.0.1:0
            admin:
              listen: 127.0.0.1:0
              hosts: [pinproxy.internal]
            """, directory: dir)
        let port = try proxy.adminPort
        func admin(_ path: String, _ extra: [String] = []) throws -> CurlResult {
            try Curl.run("http://127.0.0.1:\(port)\(path)", proxyURL: nil, caFile: nil, extra: extra, directory: dir)
        }
        #expect(try admin("/policies").status == 200)
        #expect(try admin("/policies", ["-H", "Host: localhost:\(port)"]).status == 200)
        #expect(try admin("/policies", ["-H", "Host: pinproxy.internal:\(port)"]).status == 200)

        let rebound = try admin("/policies", ["-H", "Host: attacker.test:\(port)"])
        #expect(rebound.status == 421, "\(rebound.body)")
        #expect(rebound.body.contains("admin_host_not_allowed") && !rebound.body.contains("\"hosts\""), "\(rebound.body)")
        let reloadRebound = try admin("/reload", ["-X", "POST", "-H", "Host: attacker.test:\(port)"])
        #expect(reloadRebound.status == 421)

        let crossSite = try admin("/reload", ["-X", "POST", "-H", "Origin: http://attacker.test", "-H", "Sec-Fetch-Site: cross-site"])
        #expect(crossSite.status == 403, "\(crossSite.body)")
        #expect(crossSite.body.contains("admin_cross_site"))
        #expect(try admin("/reload", ["-X", "POST"]).status == 200, "a tool's POST is served")
    }
}
