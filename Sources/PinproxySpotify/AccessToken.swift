import Foundation

/// A bearer token from a session's cache. Its `description`, `debugDescription`
/// and mirror never show the value, so it can sit in a logged struct or a
/// failing test's output without leaking (docs/contract.md §7).
public struct AccessToken: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let value: String
    /// 1 for a session's first token, +1 for each new one. A 401 names the
    /// generation it was sent with, so a stale 401 cannot discard a fresh token.
    public let generation: Int
    public let expiresAt: Date

    init(value: String, generation: Int, expiresAt: Date) {
        self.value = value
        self.generation = generation
        self.expiresAt = expiresAt
    }

    /// The value itself, for the one place that writes `Authorization: Bearer …`.
    public func reveal() -> String { value }

    public var description: String {
        "AccessToken(generation: \(generation), expires: \(expiresAt.formatted(.iso8601)))"
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(self, children: ["generation": generation, "expiresAt": expiresAt], displayStyle: .struct)
    }
}
