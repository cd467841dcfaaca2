import Foundation
import Yams

/// One YAML file composed to Yams `Node`s, which keep libyaml's marks (1-based
/// line, column in Unicode scalars). Only composing, never decoding to
/// `Codable`: decoding forgets where a value was written.
struct YAMLDocument {
    let file: String
    /// nil for an empty file.
    let root: Node?

    /// Reads and composes `file`; a read failure or syntax error becomes a
    /// diagnostic at its location and the result is nil.
    static func load(file: String, into bag: DiagnosticBag) -> YAMLDocument? {
        guard let data = FileBytes.read(file) else {
            bag.error(.file(file), "cannot read \(file): \(FileManager.default.fileExists(atPath: file) ? "permission denied" : "no such file")")
            return nil
        }
        guard let text = String(data: data, encoding: .utf8) else {
            bag.error(.file(file), "\(file) is not UTF-8 text")
            return nil
        }
        return parse(text, file: file, into: bag)
    }

    static func parse(_ text: String, file: String, into bag: DiagnosticBag) -> YAMLDocument? {
        do {
            return YAMLDocument(file: file, root: try Yams.compose(yaml: text))
        } catch let error as YamlError {
            let (mark, message) = describe(error)
            var hint = ""
            if let mark, message.contains("mapping values are not allowed") {
                hint = YAMLHint.mappingValues(text: text, line: mark.line, column: mark.column, file: file)
            }
            bag.error(SourceLocation(file: file, line: mark?.line ?? 1, column: mark?.column ?? 1), message + hint)
            return nil
        } catch {
            bag.error(.file(file), "YAML error: \(error)")
            return nil
        }
    }

    /// libyaml's own words, at the mark where it stopped.
    private static func describe(_ error: YamlError) -> (Mark?, String) {
        switch error {
        case let .scanner(context, problem, mark, _), let .parser(context, problem, mark, _),
             let .composer(context, problem, mark, _):
            let while_ = context.map { " (\($0.text) at \($0.mark))" } ?? ""
            return (mark, "YAML syntax error: \(problem)\(while_)")
        case let .reader(problem, _, _, _):
            return (nil, "YAML syntax error: \(problem)")
        case let .duplicatedKeysInMapping(duplicates, context):
            let keys = duplicates.map { "`\($0)`" }.joined(separator: ", ")
            return (context.mark, "duplicate key \(keys) in one mapping")
        default:
            return (nil, "YAML error: \(error)")
        }
    }
}
