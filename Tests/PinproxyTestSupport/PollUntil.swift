import Foundation

/// Polls `condition` until it holds or `timeout` passes; returns whether it
/// held. An upper bound for something to happen, never a speed check: the
/// default is generous because tests run side by side on two cores.
/// The one wait primitive of the suite (`pollFor`, `pollUntilAsync` and
/// `ProxyHarness.waitForAccessLog` are built on the same loop).
public func pollUntil(timeout: TimeInterval = 30, every interval: TimeInterval = 0.05,
                      _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        // The bounded poll every wait of the suite is built on.
        usleep(useconds_t(interval * 1_000_000))
    }
    return try condition()
}

/// Polls `produce` until it gives a value or `timeout` passes; returns the
/// value, or nil. Like `pollUntil`, an upper bound, never a speed check.
public func pollFor<T>(timeout: TimeInterval = 30, every interval: TimeInterval = 0.05,
                       _ produce: () throws -> T?) rethrows -> T? {
    var value: T?
    _ = try pollUntil(timeout: timeout, every: interval) {
        value = try produce()
        return value != nil
    }
    return value
}

/// `pollUntil` for async conditions and async tests: sleeps with `Task.sleep`,
/// so it blocks no thread of the cooperative pool (two on a two-core machine)
/// while it waits. Like `pollUntil`, an upper bound, never a speed check.
public func pollUntilAsync(timeout: TimeInterval = 30, every interval: TimeInterval = 0.02,
                           _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(Int(interval * 1000)))
    }
    return try await condition()
}
