import Foundation

/// Polls `condition` until it holds or `timeout` passes; returns whether it
/// held. An upper bound for something to happen, never a speed check.
public func pollUntil(timeout: TimeInterval = 10, every interval: TimeInterval = 0.05,
                      _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        usleep(useconds_t(interval * 1_000_000))
    }
    return try condition()
}

/// Polls `produce` until it gives a value or `timeout` passes; returns the
/// value, or nil. Like `pollUntil`, an upper bound, never a speed check.
public func pollFor<T>(timeout: TimeInterval = 10, every interval: TimeInterval = 0.05,
                       _ produce: () throws -> T?) rethrows -> T? {
    var value: T?
    _ = try pollUntil(timeout: timeout, every: interval) {
        value = try produce()
        return value != nil
    }
    return value
}
