/// Failed proxy logins per source address (docs/contract.md §15), as a value
/// with the clock passed in: at most `maxFailures` in a `window` that starts
/// at an address's first failure; past that, its attempts are refused
/// without any password work until the window ends. A success does not
/// clear the count (a single known password must not reset a guessing run).
/// The table is bounded: ended windows are dropped first, then the oldest.
public struct FailureLimiter: Sendable {
    public struct Limits: Sendable, Hashable {
        public var maxFailures: Int
        public var window: Duration
        public var maxTracked: Int

        public init(maxFailures: Int, window: Duration, maxTracked: Int) {
            self.maxFailures = maxFailures
            self.window = window
            self.maxTracked = maxTracked
        }

        /// 10 failures a minute per address; 10,000 addresses tracked at once.
        public static let standard = Limits(maxFailures: 10, window: .seconds(60), maxTracked: 10_000)
    }

    struct Entry: Sendable {
        var windowStart: ContinuousClock.Instant
        var failures: Int
    }

    public let limits: Limits
    private var entries: [[UInt8]: Entry] = [:]

    public init(limits: Limits = .standard) {
        self.limits = limits
    }

    /// How long `address` must still wait, or nil when it may try now.
    public func blocked(_ address: [UInt8], now: ContinuousClock.Instant) -> Duration? {
        guard let entry = entries[address] else { return nil }
        let end = entry.windowStart + limits.window
        guard now < end, entry.failures >= limits.maxFailures else { return nil }
        return end - now
    }

    /// Records one failed attempt from `address`.
    public mutating func failed(_ address: [UInt8], now: ContinuousClock.Instant) {
        if var entry = entries[address], now < entry.windowStart + limits.window {
            entry.failures += 1
            entries[address] = entry
            return
        }
        if entries[address] == nil, entries.count >= limits.maxTracked { makeRoom(now: now) }
        entries[address] = Entry(windowStart: now, failures: 1)
    }

    /// Addresses tracked (tests; a gauge, should one be wanted).
    public var trackedCount: Int { entries.count }

    private mutating func makeRoom(now: ContinuousClock.Instant) {
        let window = limits.window
        entries = entries.filter { now < $0.value.windowStart + window }
        if entries.count >= limits.maxTracked, let oldest = entries.min(by: { $0.value.windowStart < $1.value.windowStart }) {
            entries.removeValue(forKey: oldest.key)
        }
    }
}
