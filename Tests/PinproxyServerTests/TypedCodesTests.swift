import PinproxyMetrics
import PinproxyPolicy
import PinproxyTLS
import Testing

@testable import PinproxyServer

/// Codes travel as values and become text only where they leave the process
/// (a refusal, a log line, a metric label): the mappings between the types,
/// and the exact text each value is written as.
@Suite("Typed codes")
struct TypedCodesTests {
    /// Each TLS failure, its kind, and the refusal code it becomes (docs/contract.md §4).
    @Test(arguments: [
        (TLSError.verifyFailed("x"), TLSFailureKind.verifyFailed, RefusalCode.verifyFailed),
        (.tlsVersion("x"), .tlsVersion, .tlsVersion),
        (.tlsCipher("x"), .tlsCipher, .tlsCipher),
        (.tlsHandshake("x"), .tlsHandshake, .tlsHandshake),
        (.certificateRejected("x"), .tlsHandshake, .tlsHandshake),
        (.uncleanShutdown, .tlsHandshake, .tlsHandshake),
        (.protocolFailure("x"), .tlsHandshake, .tlsHandshake),
        (.configuration("x"), .configuration, .tlsHandshake),
    ])
    func aTLSFailureIsAKindAndARefusal(error: TLSError, kind: TLSFailureKind, code: RefusalCode) {
        #expect(error.kind == kind)
        #expect(ProxyError.tls(error, host: "api.test").code == code)
        #expect(ProxyError.tls(error, host: "api.test").detail == "upstream TLS: \(error.reason)")
    }

    /// The text of each kind: what `TLSError`'s description starts with.
    @Test func aTLSFailureKindsTextIsTheContractsCode() {
        #expect(TLSFailureKind.allCases.map(\.rawValue) == ["verify_failed", "tls_version", "tls_cipher", "tls_handshake", "tls_configuration"])
        #expect("\(TLSError.tlsCipher("no shared cipher"))" == "tls_cipher: no shared cipher")
        #expect("\(TLSError.uncleanShutdown)" == "tls_handshake: connection closed without close_notify")
    }

    /// A pin verdict that refuses names its refusal code as a value.
    @Test func aRefusingPinVerdictGivesItsRefusalCode() {
        #expect(PinVerdict.mismatchEnforced.refusalCode == .pinMismatch)
        #expect(PinVerdict.noActivePins(.enforced).refusalCode == .pinsExpired)
        #expect(PinVerdict.noActivePins(.chainOnly).refusalCode == nil)
        #expect(PinVerdict.unpinned.refusalCode == nil)
        // The verdict a refusal came from, and back.
        for code in [RefusalCode.pinMismatch, .pinsExpired] {
            #expect(PinVerdict(refusedWith: code)?.refusalCode == code)
        }
    }

    /// The access line's `mode`, as written (docs/operations.md).
    @Test func theAccessModesTextIsFixed() {
        #expect(AccessMode.allCases.map(\.rawValue) == ["forward", "intercept", "tunnel", "connect", "transparent"])
    }

    /// `requests_total{protocol}` from the app's HTTP version.
    @Test func theClientProtocolIsItsMetricLabel() {
        #expect(ClientProtocol.http1.metricLabel == .http1)
        #expect(ClientProtocol.h2.metricLabel == .h2)
        #expect(RequestProtocol.allCases.map(\.rawValue) == ["http1", "h2"])
    }
}
