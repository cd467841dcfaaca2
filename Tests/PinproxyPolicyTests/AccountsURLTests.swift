import Foundation
import PinproxyPolicy
import Testing

/// The token request carries the client secret in HTTP Basic: an accounts
/// URL that is not https is a configuration error, reported at the value.
struct AccountsURLTests {
    static func main(_ accounts: String) -> String {
        """
        policies: policies
        spotify:
          accounts: \(accounts)
          sessions:
            app: {client_id: abc, client_secret: s3cret}
        """
    }

    @Test(arguments: [
        ("http://127.0.0.1:8443", "`spotify.accounts` must be an https:// URL: the token request sends the client secret, which must not travel in clear; write `https://127.0.0.1:8443`"),
        ("HTTP://accounts.spotify.com/", "`spotify.accounts` must be an https:// URL: the token request sends the client secret, which must not travel in clear; write `https://accounts.spotify.com/`"),
        ("ftp://accounts.spotify.com", "`spotify.accounts` must be an https:// URL such as https://accounts.spotify.com, not `ftp://accounts.spotify.com`"),
    ])
    func aPlainAccountsURLIsRefusedAtTheValue(accounts: String, message: String) throws {
        let tree = try ConfigTree(main: Self.main(accounts), policies: ["p.yaml": "hosts: []\n"])
        let result = tree.loader().load()
        #expect(tree.rendered(result.errors) == ["pinproxy.yaml:3:13: error: \(message)"])
        #expect(result.snapshot == nil)
    }

    @Test func httpsIsAccepted() throws {
        let tree = try ConfigTree(main: Self.main("https://accounts.spotify.test/"), policies: ["p.yaml": "hosts: []\n"])
        let result = tree.loader().load()
        #expect(result.diagnostics.map(\.description) == [])
        #expect(result.snapshot?.config.spotify.accounts == "https://accounts.spotify.test")
    }
}
