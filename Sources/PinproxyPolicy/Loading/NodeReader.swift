import Foundation
import Yams

/// Reads scalars out of composed YAML with their locations, expanding
/// `${VAR}` from an injected environment (so tests and `check` never depend
/// on the process's). Every problem goes to the shared `DiagnosticBag` and
/// yields nil, so a loader keeps walking and reports everything at once.
struct NodeReader {
    let file: String
    let environment: [String: String]
    let bag: DiagnosticBag

    /// The directory relative paths in this file resolve against.
    var directory: String { (file as NSString).deletingLastPathComponent }

    func location(_ node: Node) -> SourceLocation {
        SourceLocation(file: file, line: node.mark?.line ?? 1, column: node.mark?.column ?? 1)
    }

    /// `null`, `~` or nothing at all: treated as if the key were absent.
    func isNull(_ node: Node) -> Bool {
        guard case .scalar(let scalar) = node, scalar.style == .plain else { return false }
        return ["", "~", "null", "Null", "NULL"].contains(scalar.string)
    }

    /// How a node reads in a message: the scalar itself, or its kind.
    func describe(_ node: Node) -> String {
        switch node {
        case .scalar(let scalar): return "`\(scalar.string)`"
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        }
    }

    /// The text of a scalar with `${VAR}` expanded; nil (and an error) for a
    /// collection or an unset variable.
    func text(_ node: Node, key: String, expected: String) -> String? {
        guard case .scalar(let scalar) = node else {
            bag.error(location(node), "`\(key)` must be \(expected), not \(describe(node))")
            return nil
        }
        return expand(scalar, at: location(node))
    }

    /// `${NAME}` → the variable's value. An unset variable is an error at the
    /// `$` when the scalar is on one line, so the message points at it exactly.
    func expand(_ scalar: Node.Scalar, at location: SourceLocation) -> String? {
        let text = scalar.string
        guard text.contains("${") else { return text }
        var result = ""
        var ok = true
        var scalars = Substring(text).unicodeScalars[...]
        var offset = 0
        while let first = scalars.first {
            if first == "$", scalars.dropFirst().first == "{" {
                let body = scalars.dropFirst(2)
                guard let close = body.firstIndex(of: "}") else {
                    bag.error(shifted(location, scalar, by: offset), "unterminated `${` (expected `${NAME}`)")
                    return nil
                }
                let name = String(String.UnicodeScalarView(body[..<close]))
                let length = name.unicodeScalars.count + 3
                if !isVariableName(name) {
                    bag.error(shifted(location, scalar, by: offset), "`${\(name)}` is not a valid variable reference (expected `${NAME}`, NAME of letters, digits and _)")
                    ok = false
                } else if let value = environment[name] {
                    result += value
                } else {
                    bag.error(shifted(location, scalar, by: offset), "environment variable `\(name)` is not set (referenced as `${\(name)}`)")
                    ok = false
                }
                scalars = body[body.index(after: close)...]
                offset += length
            } else {
                result.unicodeScalars.append(first)
                scalars = scalars.dropFirst()
                offset += 1
            }
        }
        return ok ? result : nil
    }

    private func isVariableName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first == "_" || (first.isASCII && first.properties.isAlphabetic) else { return false }
        return name.unicodeScalars.allSatisfy { $0 == "_" || ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) }
    }

    /// The column of the `offset`th scalar of the value, when that is knowable
    /// (one line, plain or quoted without escapes before it); else the value's start.
    private func shifted(_ location: SourceLocation, _ scalar: Node.Scalar, by offset: Int) -> SourceLocation {
        guard !scalar.string.contains("\n") else { return location }
        var shifted = location
        switch scalar.style {
        case .plain: shifted.column += offset
        case .singleQuoted, .doubleQuoted: shifted.column += offset + 1
        default: break
        }
        return shifted
    }
}
