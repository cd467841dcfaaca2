import Foundation
import NIOConcurrencyHelpers
import PinproxyPolicy
import Testing

@testable import PinproxyServer

/// docs/contract.md §15: a verified credential is not verified again while
/// cached; failures are never cached and run into the per-address limit.
struct ClientAuthenticatorTests {
    final class Clock: @unchecked Sendable {
        let start = ContinuousClock.now
        let offset = NIOLockedValueBox(Duration.zero)
        var now: ContinuousClock.Instant { start + offset.withLockedValue { $0 } }
        func advance(_ by: Duration) { offset.withLockedValue { $0 += by } }
    }

    static let password = "right-pw"
    static let hash = PasswordHash.make(password: password, iterations: 10_000)
    static let identities = ["billing": ClientIdentity(name: "billing", passwordHash: hash, from: [], location: .embeddedDefaults)]
    static let address: [UInt8] = [127, 0, 0, 9]

    static func header(_ user: String, _ password: String) -> [String] {
        [ProxyCredential(user: user, password: password).headerValue]
    }

    @Test func aVerifiedCredentialIsCachedForItsLifetimeOnly() {
        let clock = Clock()
        let calls = NIOLockedValueBox(0)
        let authenticator = ClientAuthenticator(now: { clock.now }, verify: { hash, password in
            calls.withLockedValue { $0 += 1 }
            return hash.verify(password)
        })
        for _ in 0..<5 {
            #expect(authenticator.authenticate(Self.header("billing", Self.password), address: Self.address, identities: Self.identities) == .identified("billing"))
        }
        #expect(calls.withLockedValue { $0 } == 1, "PBKDF2 runs once for a credential seen five times")
        clock.advance(ClientAuthenticator.cacheLifetime)
        _ = authenticator.authenticate(Self.header("billing", Self.password), address: Self.address, identities: Self.identities)
        #expect(calls.withLockedValue { $0 } == 2, "an expired entry is verified again")
        // A changed hash in the config is not answered from the cache.
        var changed = Self.identities
        changed["billing"]?.passwordHash = PasswordHash.make(password: "new-pw", iterations: 10_000)
        #expect(authenticator.authenticate(Self.header("billing", Self.password), address: Self.address, identities: changed)
                == .rejected(label: "billing", detail: "wrong name or password"))
    }

    @Test func failuresAreNotCachedAndHitTheLimit() {
        let clock = Clock()
        let calls = NIOLockedValueBox(0)
        let authenticator = ClientAuthenticator(limits: .init(maxFailures: 3, window: .seconds(60), maxTracked: 10), now: { clock.now },
                                                verify: { hash, password in calls.withLockedValue { $0 += 1 }; return hash.verify(password) })
        for _ in 0..<3 {
            #expect(authenticator.authenticate(Self.header("billing", "wrong"), address: Self.address, identities: Self.identities)
                    == .rejected(label: "billing", detail: "wrong name or password"))
        }
        #expect(calls.withLockedValue { $0 } == 3)
        let limited = authenticator.authenticate(Self.header("billing", Self.password), address: Self.address, identities: Self.identities)
        #expect(limited == .rateLimited(retryAfter: .seconds(60)))
        #expect(calls.withLockedValue { $0 } == 3, "no password work for a limited address")
        // An unknown name costs the same work and is labelled `_unknown`.
        #expect(authenticator.authenticate(Self.header("mallory", "x"), address: [127, 0, 0, 10], identities: Self.identities)
                == .rejected(label: "_unknown", detail: "wrong name or password"))
        #expect(calls.withLockedValue { $0 } == 4)
        clock.advance(.seconds(60))
        #expect(authenticator.authenticate(Self.header("billing", Self.password), address: Self.address, identities: Self.identities) == .identified("billing"))
    }

    /// Issue 27 item 7: an unknown name runs one PBKDF2 shaped like the
    /// configured hashes (their most common iteration count), not
    /// `pinproxy passwd`'s 150,000, which set unknown names apart by timing.
    @Test func anUnknownNameCostsOnePBKDF2ShapedLikeTheConfiguredHashes() {
        func identity(_ name: String, _ iterations: Int) -> ClientIdentity {
            ClientIdentity(name: name, passwordHash: PasswordHash.make(password: "pw-\(name)", iterations: iterations), from: [], location: .embeddedDefaults)
        }
        let identities = ["a": identity("a", 20_000), "b": identity("b", 20_000), "c": identity("c", 30_000)]
        let seen = NIOLockedValueBox<[PasswordHash]>([])
        let authenticator = ClientAuthenticator(verify: { hash, password in
            seen.withLockedValue { $0.append(hash) }
            return hash.verify(password)
        })
        #expect(authenticator.authenticate(Self.header("mallory", "x"), address: Self.address, identities: identities)
                == .rejected(label: "_unknown", detail: "wrong name or password"))
        let decoys = seen.withLockedValue { $0 }
        #expect(decoys.count == 1, "one PBKDF2 for an unknown name")
        #expect(decoys.first?.iterations == 20_000)
        #expect(decoys.first?.salt.count == PasswordHash.saltLength && decoys.first?.hash.count == PasswordHash.hashLength)
        #expect(decoys.first.map { identities.values.map(\.passwordHash).contains($0) } == false, "the decoy is no identity's hash")
        // A wrong password for a known name does the same work.
        _ = authenticator.authenticate(Self.header("a", "wrong"), address: [127, 0, 0, 11], identities: identities)
        #expect(seen.withLockedValue { $0.count } == 2 && seen.withLockedValue { $0[1].iterations } == 20_000)
        // The decoy follows the configuration: a tie goes to the larger count, none configured is passwd's.
        #expect(ClientAuthenticator.decoy(for: ["b": identity("b", 20_000), "c": identity("c", 30_000)]).iterations == 30_000)
        #expect(ClientAuthenticator.decoy(for: Self.identities).iterations == 10_000)
        #expect(ClientAuthenticator.decoy(for: [:]).iterations == PasswordWorkFactor.defaultIterations)
    }

    @Test func noHeaderIsAnonymousAndGarbageIsRejected() {
        let authenticator = ClientAuthenticator()
        #expect(authenticator.authenticate([], address: Self.address, identities: Self.identities) == .anonymous)
        #expect(authenticator.authenticate(["Bearer x"], address: Self.address, identities: Self.identities)
                == .rejected(label: "_unknown", detail: "Proxy-Authorization must be one `Basic` credential (NAME:PASSWORD in base64)"))
    }
}
