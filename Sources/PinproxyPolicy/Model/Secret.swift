/// A secret read from configuration (`client_secret`, the swap `key`).
/// Its `description`, `debugDescription` and `dump` never show the value, so a
/// config struct can be logged or printed in a failing test without leaking
/// it (docs/contract.md §7: secrets never appear in logs, metrics or errors).
public struct Secret: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let value: String

    public init(_ value: String) {
        self.value = value
    }

    /// The value itself, for the one place that sends it (HTTP Basic, AES key).
    public func reveal() -> String { value }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "Secret(<redacted>)" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
