import Logging

/// One problem found while loading or validating configuration. `check`
/// prints them all at once, `reload` returns them, and a failed start logs
/// them: nobody fixes one typo per restart.
public struct Diagnostic: Sendable, Hashable, CustomStringConvertible {
    public enum Severity: String, Sendable, Hashable, Codable {
        case error
        case warning
    }

    public var location: SourceLocation
    public var severity: Severity
    public var message: String

    public init(_ severity: Severity, at location: SourceLocation, _ message: String) {
        self.location = location
        self.severity = severity
        self.message = message
    }

    public static func error(at location: SourceLocation, _ message: String) -> Diagnostic {
        Diagnostic(.error, at: location, message)
    }

    public static func warning(at location: SourceLocation, _ message: String) -> Diagnostic {
        Diagnostic(.warning, at: location, message)
    }

    public var file: String { location.file }
    public var line: Int { location.line }
    public var column: Int { location.column }

    /// `FILE:LINE:COL: error: message`, the form compilers use, so editors
    /// and CI annotations can jump to the line.
    public var description: String {
        "\(location): \(severity.rawValue): \(message)"
    }

    /// The same problem, promoted to an error (`check --strict`).
    public var asError: Diagnostic {
        var copy = self
        copy.severity = .error
        return copy
    }
}

extension Array where Element == Diagnostic {
    public var errors: [Diagnostic] { filter { $0.severity == .error } }
    public var warnings: [Diagnostic] { filter { $0.severity == .warning } }
    public var hasErrors: Bool { contains { $0.severity == .error } }

    /// In file order, then line, then column: the order a reader fixes them.
    public func sortedByLocation() -> [Diagnostic] {
        enumerated().sorted { a, b in
            let (l, r) = (a.element.location, b.element.location)
            if l.file != r.file { return l.file < r.file }
            if l.line != r.line { return l.line < r.line }
            if l.column != r.column { return l.column < r.column }
            return a.offset < b.offset
        }.map(\.element)
    }
}

/// Collects diagnostics while a loader walks the files. A class so that the
/// many small readers of one load share it without threading `inout` through.
final class DiagnosticBag {
    private(set) var all: [Diagnostic] = []

    func error(_ location: SourceLocation, _ message: String) {
        all.append(.error(at: location, message))
    }

    func warning(_ location: SourceLocation, _ message: String) {
        all.append(.warning(at: location, message))
    }

    func append(_ diagnostic: Diagnostic) {
        all.append(diagnostic)
    }

    var hasErrors: Bool { all.hasErrors }
}

extension Diagnostic {
    /// The place as separate log fields, so a log search can find every line
    /// about one file (`file`, `line`, `column`).
    public var logMetadata: Logger.Metadata {
        ["file": "\(location.file)", "line": .stringConvertible(location.line), "column": .stringConvertible(location.column)]
    }
}
