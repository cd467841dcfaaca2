import Foundation

// The one wait primitive of the suite: poll a condition until it holds or a
// bound passes. An upper bound for something to happen, never a speed check:
// the default is generous because tests run side by side on two cores. What
// is polled is an external process (its output file, its port, its exit) or
// a side effect of one: nothing in-process is waited for with a poll.
//
// Two spellings of the same loop: async callers (`try await pollUntil`)
// sleep with `Task.sleep` and hold no thread while they wait; synchronous
// callers sleep their thread, which is why their suites carry the
// `.blockingWaits` trait (they run off the cooperative pool).

/// Polls `condition` until it holds or `timeout` passes; returns whether it held.
public func pollUntil(timeout: TimeInterval = 30, every interval: TimeInterval = 0.05,
                      _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try await condition() { return true }
        // A bounded poll of an external process; suspends, holds no thread.
        try? await Task.sleep(for: .milliseconds(Int(interval * 1000)))
    }
    return try await condition()
}

/// `pollUntil` for synchronous tests (which run under `.blockingWaits`).
/// Named apart, not an overload: inside `#expect(await pollUntil { … })`
/// the macro's closure is synchronous, so an overload of the same name was
/// chosen there for a synchronous condition, and it slept a cooperative
/// pool thread (two on this machine) while the tasks it waited for needed one.
@available(*, noasync, message: "sleeps its thread: use the async pollUntil")
public func pollUntilBlocking(timeout: TimeInterval = 30, every interval: TimeInterval = 0.05,
                      _ condition: () throws -> Bool) rethrows -> Bool {
    CooperativePool.refuseBlocking("pollUntilBlocking")
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        // A bounded poll of an external process, on a `.blockingWaits` thread.
        usleep(useconds_t(interval * 1_000_000))
    }
    return try condition()
}

/// Polls `produce` until it gives a value or `timeout` passes; returns the
/// value, or nil. Like `pollUntil`, an upper bound, never a speed check.
public func pollFor<T>(timeout: TimeInterval = 30, every interval: TimeInterval = 0.05,
                       _ produce: () async throws -> T?) async rethrows -> T? {
    var value: T?
    _ = try await pollUntil(timeout: timeout, every: interval) {
        value = try await produce()
        return value != nil
    }
    return value
}

/// `pollFor` for synchronous tests (which run under `.blockingWaits`).
@available(*, noasync, message: "sleeps its thread: use the async pollFor")
public func pollForBlocking<T>(timeout: TimeInterval = 30, every interval: TimeInterval = 0.05,
                       _ produce: () throws -> T?) rethrows -> T? {
    var value: T?
    _ = try pollUntilBlocking(timeout: timeout, every: interval) {
        value = try produce()
        return value != nil
    }
    return value
}
