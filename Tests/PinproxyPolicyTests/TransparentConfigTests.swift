import Foundation
import PinproxyPolicy
import Testing

/// `transparent: {listen: ADDR:PORT}` (docs/contract.md §16): read into the
/// config, absent by default, and its mistakes reported at file:line:col.
struct TransparentConfigTests {
    @Test func listenIsRead() throws {
        let tree = try ConfigTree(main: "policies: policies\ntransparent:\n  listen: 127.0.0.1:15001\n", policies: ["p.yaml": "hosts: []\n"])
        let result = tree.loader().load()
        #expect(result.errors.isEmpty, "\(tree.rendered(result.errors))")
        #expect(result.snapshot?.config.transparent?.listen == HostPort(host: "127.0.0.1", port: 15001))
    }

    @Test func absentMeansOff() throws {
        let tree = try ConfigTree(policies: ["p.yaml": "hosts: []\n"])
        #expect(tree.loader().load().snapshot?.config.transparent == nil)
    }

    /// Port 0 is a fresh port at each bind (tests give every listener port 0).
    @Test func portZeroBesideOtherPortZeroListenersIsNoCollision() throws {
        let tree = try ConfigTree(main: "policies: policies\nlisten: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0}\ntransparent: {listen: 127.0.0.1:0}\n",
                                  policies: ["p.yaml": "hosts: []\n"])
        let result = tree.loader().load()
        #expect(result.errors.isEmpty, "\(tree.rendered(result.errors))")
        #expect(result.snapshot?.config.transparent?.listen.port == 0)
    }

    @Test(arguments: [
        ("policies: policies\ntransparent: {}\n",
         "pinproxy.yaml:2:14: error: transparent needs listen: ADDR:PORT (the address nftables redirects to), or remove the block"),
        ("policies: policies\ntransparent:\n  listn: 127.0.0.1:1\n",
         "pinproxy.yaml:3:3: error: unknown key `listn` in `transparent`; did you mean `listen`?"),
        ("policies: policies\nlisten: 127.0.0.1:8080\ntransparent:\n  listen: 127.0.0.1:8080\n",
         "pinproxy.yaml:4:11: error: `transparent.listen` 127.0.0.1:8080 is also `listen`: give the transparent listener a port of its own (e.g. 127.0.0.1:8443)"),
        ("policies: policies\ntransparent: {listen: 127.0.0.1:9090}\n",
         "pinproxy.yaml:2:23: error: `transparent.listen` 127.0.0.1:9090 is also `admin.listen`: give the transparent listener a port of its own (e.g. 127.0.0.1:8443)"),
    ])
    func mistakesAreReportedAtTheirPlace(main: String, expected: String) throws {
        let tree = try ConfigTree(main: main, policies: ["p.yaml": "hosts: []\n"])
        let result = tree.loader().load()
        #expect(tree.rendered(result.errors).contains(expected), "\(tree.rendered(result.errors))")
        #expect(result.snapshot == nil)
    }
}
