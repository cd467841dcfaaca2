import Foundation
import PinproxyTestSupport
import Testing

/// Failed proxy logins are limited per (address, user name), with a looser
/// cap per address (docs/contract.md §15): one app behind a shared address
/// (a sidecar, a NAT) with a stale password does not lock out the others.
@Suite("login rate limit per address and user", .blockingWaits, .serialized)
struct LoginLimitTests {
    @Test func aStalePasswordLocksOutOnlyItsOwnUserBehindASharedAddress() async throws {
        let stack = try await ClientIdentityTests.Stack()
        let shared = ["--interface", "127.0.0.3"]
        for attempt in 1...10 {
            let stale = try stack.curl("https://open.test/echo", as: "reports", "stale-password", shared)
            #expect(stale.connectStatus == 407, "attempt \(attempt)")
        }
        // reports is limited from that address, even with its right password…
        let limited = try stack.curl("https://open.test/echo", as: "reports", ClientIdentityTests.reportsPassword, shared)
        #expect(limited.connectStatus == 429)
        #expect(Int(limited.headers["retry-after"] ?? "") ?? 0 > 0)
        // …but billing, behind the same address with its right password, is served.
        let other = try stack.curl("https://open.test/echo", as: "billing", ClientIdentityTests.billingPassword, shared)
        #expect(other.status == 200, "\(other.connectStatus) \(other.body) \(other.stderr)")
    }
}
