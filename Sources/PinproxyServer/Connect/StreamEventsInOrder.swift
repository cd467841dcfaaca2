import NIOCore
import NIOHTTP2

/// Hands the HTTP/2 connection manager its stream events in the order the
/// streams opened and closed, so it counts open streams right (an idle
/// connection is one with none).
///
/// swift-nio-http2 reports a stream's creation only after it has handed the
/// stream its first frame. A stream that ends inside that first read (its
/// exchange refuses at once: a head `HTTP2StreamAdapter` rejects) is reset from within
/// the creation report, and the reset's close report overtakes it. The
/// manager then asserted ("Can't close stream 1, it wasn't open") in a debug
/// build and, in release, counted the stream open for ever, so the connection
/// never went idle. Here a close that comes before its creation is held, and
/// the creation that follows drops it: neither reaches the manager.
struct StreamEventsInOrder: NIOHTTP2StreamDelegate {
    private let manager: NIOHTTP2ServerConnectionManagementHandler.HTTP2StreamDelegate
    private let ledger: NIOLoopBoundBox<StreamLedger>

    init(manager: NIOHTTP2ServerConnectionManagementHandler.HTTP2StreamDelegate, eventLoop: any EventLoop) {
        self.manager = manager
        self.ledger = NIOLoopBoundBox(StreamLedger(), eventLoop: eventLoop)
    }

    func streamCreated(_ id: HTTP2StreamID, channel: any Channel) {
        if ledger.value.created(id) { manager.streamCreated(id, channel: channel) }
    }

    func streamClosed(_ id: HTTP2StreamID, channel: any Channel) {
        if ledger.value.closed(id) { manager.streamClosed(id, channel: channel) }
    }
}

/// Which stream events to pass on: a close only for a stream whose creation
/// was passed on; a creation not if its close came first.
struct StreamLedger {
    private var open: Set<HTTP2StreamID> = []
    private var closedBeforeCreated: Set<HTTP2StreamID> = []

    /// Whether to report this creation.
    mutating func created(_ id: HTTP2StreamID) -> Bool {
        if closedBeforeCreated.remove(id) != nil { return false }
        open.insert(id)
        return true
    }

    /// Whether to report this close.
    mutating func closed(_ id: HTTP2StreamID) -> Bool {
        if open.remove(id) != nil { return true }
        closedBeforeCreated.insert(id)
        return false
    }
}
