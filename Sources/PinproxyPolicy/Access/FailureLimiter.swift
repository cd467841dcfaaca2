/// Failed proxy logins (docs/contract.md §15), as a value with the clock
/// passed in. Counted twice, fail2ban-style: per (source address, user name
/// sent), at most `maxFailures` in a `window` that starts at the first
/// failure; and per address alone, at most the looser
/// `maxFailuresPerAddress`. Past either, attempts are refused without any
/// password work until that window ends. So an app behind a shared address
/// (a sidecar, a NAT) whose password went stale locks out its own name
/// only, while one address guessing across many names is still held. A
/// success does not clear a count (a single known password must not reset a
/// guessing run). Each table is bounded: ended windows are dropped first,
/// then the oldest.
public struct FailureLimiter: Sendable {
    public struct Limits: Sendable, Hashable {
        /// Per (address, user name).
        public var maxFailures: Int
        /// Per address, whatever the names.
        public var maxFailuresPerAddress: Int
        public var window: Duration
        /// Entries per table.
        public var maxTracked: Int

        /// `maxFailuresPerAddress` defaults to ten times `maxFailures`.
        public init(maxFailures: Int, maxFailuresPerAddress: Int? = nil, window: Duration, maxTracked: Int) {
            self.maxFailures = maxFailures
            self.maxFailuresPerAddress = maxFailuresPerAddress ?? maxFailures * 10
            self.window = window
            self.maxTracked = maxTracked
        }

        /// 10 failures a minute per (address, name), 100 per address; 10,000 of each tracked at once.
        public static let standard = Limits(maxFailures: 10, maxFailuresPerAddress: 100, window: .seconds(60), maxTracked: 10_000)
    }

    /// A user name as counted: as sent, cut to a bounded length (it is the
    /// client's text, and only a table key).
    struct UserKey: Hashable, Sendable {
        var address: [UInt8]
        var user: String

        init(_ address: [UInt8], _ user: String) {
            self.address = address
            self.user = String(decoding: user.utf8.prefix(256), as: UTF8.self)
        }
    }

    public let limits: Limits
    private var perUser: WindowCounts<UserKey>
    private var perAddress: WindowCounts<[UInt8]>

    public init(limits: Limits = .standard) {
        self.limits = limits
        self.perUser = WindowCounts(window: limits.window, maxTracked: limits.maxTracked)
        self.perAddress = WindowCounts(window: limits.window, maxTracked: limits.maxTracked)
    }

    /// How long `user` at `address` must still wait, or nil when it may try now.
    /// `user` is the name the credential sent (empty when none could be read).
    public func blocked(_ address: [UInt8], user: String, now: ContinuousClock.Instant) -> Duration? {
        let waits = [
            perUser.wait(UserKey(address, user), limit: limits.maxFailures, now: now),
            perAddress.wait(address, limit: limits.maxFailuresPerAddress, now: now),
        ].compactMap { $0 }
        return waits.max()
    }

    /// Records one failed attempt by `user` from `address`.
    public mutating func failed(_ address: [UInt8], user: String, now: ContinuousClock.Instant) {
        perUser.count(UserKey(address, user), now: now)
        perAddress.count(address, now: now)
    }

    /// (address, name) pairs tracked (tests; a gauge, should one be wanted).
    public var trackedCount: Int { perUser.count }
    /// Addresses tracked.
    public var trackedAddressCount: Int { perAddress.count }
}

/// Failures per key in a window that starts at the key's first failure; bounded.
struct WindowCounts<Key: Hashable & Sendable>: Sendable {
    struct Entry: Sendable {
        var windowStart: ContinuousClock.Instant
        var failures: Int
    }

    let window: Duration
    let maxTracked: Int
    private var entries: [Key: Entry] = [:]

    init(window: Duration, maxTracked: Int) {
        self.window = window
        self.maxTracked = maxTracked
    }

    var count: Int { entries.count }

    /// The rest of `key`'s window once it has `limit` failures in it.
    func wait(_ key: Key, limit: Int, now: ContinuousClock.Instant) -> Duration? {
        guard let entry = entries[key] else { return nil }
        let end = entry.windowStart + window
        guard now < end, entry.failures >= limit else { return nil }
        return end - now
    }

    mutating func count(_ key: Key, now: ContinuousClock.Instant) {
        if var entry = entries[key], now < entry.windowStart + window {
            entry.failures += 1
            entries[key] = entry
            return
        }
        if entries[key] == nil, entries.count >= maxTracked { makeRoom(now: now) }
        entries[key] = Entry(windowStart: now, failures: 1)
    }

    private mutating func makeRoom(now: ContinuousClock.Instant) {
        let window = self.window
        entries = entries.filter { now < $0.value.windowStart + window }
        if entries.count >= maxTracked, let oldest = entries.min(by: { $0.value.windowStart < $1.value.windowStart }) {
            entries.removeValue(forKey: oldest.key)
        }
    }
}
