import Foundation
import PinproxyPolicy
import PinproxyTLS
import Testing

/// docs/contract.md §3 "Pin evaluation" steps 2–5, at the edges, with an injected clock.
struct PinEvaluationTests {
    static let now = Fixture.now
    static let leaf = ObservedCertificate(spkiSHA256: Fixture.pin(1), certificateSHA256: Fixture.pin(11), subject: "CN=leaf")
    static let root = ObservedCertificate(spkiSHA256: Fixture.pin(3), certificateSHA256: Fixture.pin(13), subject: "CN=root")
    static let chain = [leaf, root]

    static func pin(_ seed: UInt8, kind: Pin.Kind = .spki, from: Date? = nil, to: Date? = nil) -> Pin {
        Pin(kind: kind, hash: Fixture.pin(seed), notBefore: from, notAfter: to)
    }

    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var pins: PinPolicy?
        var verdict: PinVerdict
        var label: String
        var refusal: RefusalCode?
        var testDescription: String { name }
    }

    static let ms: TimeInterval = 0.001
    static let cases: [Case] = [
        Case(name: "no pins section: unpinned", pins: nil, verdict: .unpinned, label: "unpinned", refusal: nil),
        Case(name: "leaf SPKI matches", pins: PinPolicy(pins: [pin(1)]), verdict: .match(pin(1)), label: "match", refusal: nil),
        Case(name: "root SPKI matches", pins: PinPolicy(pins: [pin(9), pin(3)]), verdict: .match(pin(3)), label: "match", refusal: nil),
        Case(name: "pin starting exactly now is active", pins: PinPolicy(pins: [pin(1, from: now)]),
             verdict: .match(pin(1, from: now)), label: "match", refusal: nil),
        Case(name: "pin ending exactly now is active", pins: PinPolicy(pins: [pin(1, to: now)]),
             verdict: .match(pin(1, to: now)), label: "match", refusal: nil),
        Case(name: "pin starting just after now is not", pins: PinPolicy(pins: [pin(1, from: now + ms)]),
             verdict: .noActivePins(.enforced), label: "no_active_pins", refusal: .pinsExpired),
        Case(name: "pin ended just before now: on_expiry fail", pins: PinPolicy(pins: [pin(1, to: now - ms)], onExpiry: .fail),
             verdict: .noActivePins(.enforced), label: "no_active_pins", refusal: .pinsExpired),
        Case(name: "pin ended just before now: on_expiry chain_only", pins: PinPolicy(pins: [pin(1, to: now - ms)], onExpiry: .chainOnly),
             verdict: .noActivePins(.chainOnly), label: "no_active_pins", refusal: nil),
        Case(name: "mismatch enforced", pins: PinPolicy(pins: [pin(9)]),
             verdict: .mismatchEnforced, label: "mismatch_enforced", refusal: .pinMismatch),
        Case(name: "mismatch in report mode", pins: PinPolicy(mode: .report, pins: [pin(9)]),
             verdict: .mismatchReported(reason: .reportMode), label: "mismatch_reported", refusal: nil),
        Case(name: "expired pin does not match even when equal", pins: PinPolicy(pins: [pin(1, to: now - ms), pin(9)]),
             verdict: .mismatchEnforced, label: "mismatch_enforced", refusal: .pinMismatch),
        Case(name: "transition window opening now", pins: PinPolicy(pins: [pin(9)], transition: TimeWindow(from: now, until: now + 86400)),
             verdict: .mismatchReported(reason: .transitionWindow), label: "mismatch_reported", refusal: nil),
        Case(name: "transition window closing now", pins: PinPolicy(pins: [pin(9)], transition: TimeWindow(from: now - 86400, until: now)),
             verdict: .mismatchReported(reason: .transitionWindow), label: "mismatch_reported", refusal: nil),
        Case(name: "transition window closed just before now", pins: PinPolicy(pins: [pin(9)], transition: TimeWindow(from: now - 86400, until: now - ms)),
             verdict: .mismatchEnforced, label: "mismatch_enforced", refusal: .pinMismatch),
        Case(name: "transition window not yet open", pins: PinPolicy(pins: [pin(9)], transition: TimeWindow(from: now + ms, until: now + 86400)),
             verdict: .mismatchEnforced, label: "mismatch_enforced", refusal: .pinMismatch),
        Case(name: "cert_sha256 matches the whole certificate", pins: PinPolicy(pins: [pin(13, kind: .certificate)]),
             verdict: .match(pin(13, kind: .certificate)), label: "match", refusal: nil),
        Case(name: "cert_sha256 does not match an SPKI hash", pins: PinPolicy(pins: [pin(3, kind: .certificate)]),
             verdict: .mismatchEnforced, label: "mismatch_enforced", refusal: .pinMismatch),
        Case(name: "report mode with no active pins never blocks", pins: PinPolicy(mode: .report, pins: [pin(1, to: now - ms)]),
             verdict: .noActivePins(.chainOnly), label: "no_active_pins", refusal: nil),
    ]

    @Test(arguments: cases)
    func evaluates(_ c: Case) {
        let evaluation = PinEvaluator.evaluate(chain: Self.chain, pins: c.pins, now: Self.now)
        #expect(evaluation.verdict == c.verdict)
        #expect(evaluation.verdict.metricLabel == c.label)
        #expect(evaluation.verdict.refusalCode == c.refusal)
        #expect(evaluation.verdict.allowsConnection == (c.refusal == nil))
        #expect(evaluation.observedPins == ["sha256/" + Fixture.pin(1), "sha256/" + Fixture.pin(3)])
    }

    @Test func sha256PrefixAndMissingPaddingAreCanonicalized() throws {
        let plain = Fixture.pin(1)
        #expect(Pin.canonicalHash("sha256/" + plain) == plain)
        #expect(Pin.canonicalHash("SHA256/" + plain) == plain)
        #expect(Pin.canonicalHash(String(plain.dropLast())) == plain)
        #expect(Pin.canonicalHash(Data(repeating: 1, count: 31).base64EncodedString()) == nil)
        #expect(Pin.canonicalHash("not base64!") == nil)
        // Through the loader: a prefixed pin matches the bare hash OpenSSL reports.
        let tree = try ConfigTree(policies: ["p.yaml": """
            hosts:
              - match: a.example.com
                pins:
                  spki_sha256: [{pin: "sha256/\(plain)"}, {pin: "\(Fixture.pin(2))"}]
            """])
        let snapshot = try #require(tree.loader().load().snapshot)
        let pins = snapshot.policy(forHost: "a.example.com")?.pins
        #expect(PinEvaluator.evaluate(chain: Self.chain, pins: pins, now: Self.now).verdict.metricLabel == "match")
    }

    @Test func tokenAttachmentFollowsTheVerdict() {
        #expect(PinVerdict.match(Self.pin(1)).permitsTokenAttachment(attachUnpinned: false))
        #expect(PinVerdict.mismatchReported(reason: .transitionWindow).permitsTokenAttachment(attachUnpinned: false))
        #expect(!PinVerdict.mismatchReported(reason: .reportMode).permitsTokenAttachment(attachUnpinned: false))
        #expect(PinVerdict.mismatchReported(reason: .reportMode).permitsTokenAttachment(attachUnpinned: true))
        #expect(!PinVerdict.noActivePins(.chainOnly).permitsTokenAttachment(attachUnpinned: false))
        #expect(!PinVerdict.mismatchEnforced.permitsTokenAttachment(attachUnpinned: true))
    }

    /// The pin format the loader canonicalizes to is the one `Certificate` computes.
    @Test func realCertificateHashesMatchLoadedPins() throws {
        let path = "/etc/ssl/certs/DigiCert_Global_Root_CA.pem"
        let certificate = try #require(try Certificate.loadPEM(file: path).first)
        let observed = ObservedCertificate(spkiSHA256: certificate.spkiSHA256, certificateSHA256: certificate.certificateSHA256)
        let policy = PinPolicy(pins: [Pin(hash: Pin.canonicalHash("sha256/r/mIkG3eEpVdm+u/ko/cwxzOMo1bk4TyHIlByibiA5E=")!)])
        #expect(PinEvaluator.evaluate(chain: [observed], pins: policy, now: Self.now).verdict.metricLabel == "match")
    }
}
