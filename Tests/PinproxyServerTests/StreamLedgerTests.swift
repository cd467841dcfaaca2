import NIOHTTP2
import Testing

@testable import PinproxyServer

/// The order fix between swift-nio-http2's stream reports and the connection
/// manager (Connect/StreamEventsInOrder.swift); end to end in
/// HTTP2ConnectionTests (a head refused within its first read).
@Suite("Stream ledger")
struct StreamLedgerTests {
    @Test func createThenCloseBothPassOn() {
        var ledger = StreamLedger()
        let passedOn = [ledger.created(1), ledger.closed(1)]
        #expect(passedOn == [true, true])
    }

    @Test func aCloseBeforeItsCreationIsHeldAndBothAreDropped() {
        var ledger = StreamLedger()
        let passedOn = [ledger.closed(1), ledger.created(1)]
        #expect(passedOn == [false, false])
        // Nothing is left of stream 1: a later stream passes on as usual.
        let later = [ledger.created(3), ledger.closed(3)]
        #expect(later == [true, true])
    }
}
