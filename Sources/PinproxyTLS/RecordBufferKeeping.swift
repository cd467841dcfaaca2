import NIOCore

/// When a connection keeps OpenSSL's record buffers between records.
///
/// Why: under `SSL_MODE_RELEASE_BUFFERS` (the contexts' mode, so that an
/// idle connection holds none of their 34 KiB) OpenSSL frees both buffers
/// whenever they are empty and takes them again for the next record: four
/// times a proxied keep-alive request. Kept while busy, a keep-alive
/// request costs about 5% less CPU when the proxy shares its cores; kept
/// always, a burst of new connections leaves the heap 12 KiB a connection
/// larger (bench/README.md, issue 33). So a connection that moves `busyRecords`
/// records within `quietInterval` keeps them, and gives them back at the
/// first interval in which it moves fewer. A connection that makes a
/// request now and then never keeps them, and pays one comparison a record;
/// only a kept one has a timer (the handler's check, every interval).
struct RecordBufferKeeping {
    static let quietInterval = TimeAmount.milliseconds(250)
    /// Four request-and-answer exchanges.
    static let busyRecords = 8

    private(set) var keeping = false
    /// Records moved since `windowStart` (not keeping) or since the last check (keeping).
    private var records = 0
    private var windowStart = NIODeadline.uptimeNanoseconds(0)

    /// A record went in or out. True when the connection has just become
    /// busy: keep the buffers from now on and check every interval.
    /// `now` is read only at a window's first record and at its last.
    mutating func recordMoved(now: () -> NIODeadline) -> Bool {
        records += 1
        if keeping { return false }
        if records == 1 {
            windowStart = now()
        } else if records >= Self.busyRecords {
            records = 0
            if now() - windowStart <= Self.quietInterval {
                keeping = true
                return true
            }
        }
        return false
    }

    /// The check, an interval after the last: true to go on keeping; false
    /// when the interval was quieter than busy, and the buffers go back.
    mutating func check() -> Bool {
        guard keeping else { return false }
        let busy = records >= Self.busyRecords
        records = 0
        if !busy { keeping = false }
        return busy
    }
}
