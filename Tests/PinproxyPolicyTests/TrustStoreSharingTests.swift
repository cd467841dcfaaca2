import Foundation
import PinproxyPolicy
import PinproxyTestSupport
import PinproxyTLS
import Testing

/// Loading the system trust store costs tens of milliseconds and most of a
/// megabyte; a policy set of thousands of hosts must load it once, not once
/// per host. Contexts that trust the same roots share one store.
@Suite(.blockingWaits)
struct TrustStoreSharingTests {
    @Test func policiesWithTheSameTrustRootsShareOneStore() throws {
        let dir = try TemporaryDirectory("pinproxy-trust")
        let pki = try TestPKI.make(in: dir)
        var hosts = (0..<200).map { "  - {match: h\($0).example.com, action: intercept}" }
        hosts += (0..<3).map { "  - {match: c\($0).example.com, action: intercept, tls: {ca_file: \(pki.rootCertificate)}}" }
        hosts += ["  - {match: other.example.com, action: intercept, tls: {ca_file: \(pki.chainFile)}}"]
        let tree = try ConfigTree(policies: ["p.yaml": "hosts:\n" + hosts.joined(separator: "\n") + "\n"])
        let result = tree.loader().load()
        #expect(result.errors.map(\.description) == [])
        let snapshot = try #require(result.snapshot)

        func stores(_ prefix: String) -> Set<TrustStoreIdentity> {
            Set(snapshot.policies.filter { $0.spec.match.description.hasPrefix(prefix) }.map(\.tlsContext.trustStoreIdentity))
        }
        #expect(stores("h").count == 1, "200 policies on the system store loaded it \(stores("h").count) times")
        #expect(stores("c").count == 1, "3 policies naming one ca_file loaded it \(stores("c").count) times")
        #expect(stores("other").count == 1)
        #expect(Set(snapshot.policies.map(\.tlsContext.trustStoreIdentity)).count == 3)
    }

    @Test func aReloadReadsTheTrustFilesAgain() throws {
        let dir = try TemporaryDirectory("pinproxy-trust")
        let pki = try TestPKI.make(in: dir)
        let policy = "hosts: [{match: a.example.com, action: intercept, tls: {ca_file: \(pki.rootCertificate)}}]\n"
        let tree = try ConfigTree(policies: ["p.yaml": policy])
        let store = try PolicyStore.load(tree.loader()).get()
        let first = store.snapshot  // kept alive, so its store's address cannot be reused
        #expect(store.reload().metricLabel == "success")
        let before = try #require(first.policies.first).tlsContext.trustStoreIdentity
        let after = try #require(store.snapshot.policies.first).tlsContext.trustStoreIdentity
        // An edited CA file takes effect at the next reload: stores are shared
        // within one load, never carried over from the previous one.
        #expect(before != after)
    }
}
