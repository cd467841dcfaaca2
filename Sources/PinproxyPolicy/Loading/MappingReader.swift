import Foundation
import PinproxyTLS
import Yams

/// Typed access to one YAML mapping whose keys are known (`ConfigKeys`).
/// Creating it reports unknown keys at the key, with the nearest known key;
/// each typed getter reports a bad value at the value. Getters return nil
/// when the key is absent, `null`, or wrong (the error already recorded).
struct MappingReader {
    let reader: NodeReader
    /// The `ConfigKeys` path of this object (`hosts[].tls`).
    let schemaPath: String
    /// Prefix of this object's keys in a `SourceMap` (`tls.`).
    let mapPrefix: String
    let location: SourceLocation
    private(set) var entries: [(key: String, keyNode: Node, value: Node)] = []

    /// nil (and an error) when `node` is not a mapping. With `known` nil, any key is accepted.
    init?(_ node: Node, reader: NodeReader, key: String, schemaPath: String, mapPrefix: String, known: [String]?) {
        self.reader = reader
        self.schemaPath = schemaPath
        self.mapPrefix = mapPrefix
        self.location = reader.location(node)
        guard case .mapping(let mapping) = node else {
            reader.bag.error(reader.location(node), "`\(key)` must be a mapping, not \(reader.describe(node))")
            return nil
        }
        for (keyNode, value) in mapping {
            guard case .scalar(let scalar) = keyNode else {
                reader.bag.error(reader.location(keyNode), "a key must be a plain name, not \(reader.describe(keyNode))")
                continue
            }
            let name = scalar.string
            if let known, !known.contains(name) {
                let place = schemaPath.isEmpty ? "" : " in `\(schemaPath)`"
                if let suggestion = KeySuggestion.nearest(to: name, in: known) {
                    reader.bag.error(reader.location(keyNode), "unknown key `\(name)`\(place); did you mean `\(suggestion)`?")
                } else {
                    reader.bag.error(reader.location(keyNode), "unknown key `\(name)`\(place); known keys: \(known.joined(separator: ", "))")
                }
                continue
            }
            entries.append((name, keyNode, value))
        }
    }

    /// A mapping of known keys, taken from `ConfigKeys`.
    init?(_ node: Node, reader: NodeReader, key: String, schemaPath: String, mapPrefix: String, table: [String: [String]]) {
        self.init(node, reader: reader, key: key, schemaPath: schemaPath, mapPrefix: mapPrefix, known: table[schemaPath])
    }

    // MARK: Raw access

    /// The value node, nil when absent or `null`.
    func node(_ key: String) -> Node? {
        guard let value = entries.first(where: { $0.key == key })?.value, !reader.isNull(value) else { return nil }
        return value
    }

    func has(_ key: String) -> Bool { node(key) != nil }

    func keyLocation(_ key: String) -> SourceLocation {
        entries.first(where: { $0.key == key }).map { reader.location($0.keyNode) } ?? location
    }

    func valueLocation(_ key: String) -> SourceLocation {
        node(key).map(reader.location) ?? keyLocation(key)
    }

    /// Records the location of every present value under `mapPrefix`.
    func record(into map: inout SourceMap) {
        for entry in entries {
            map.record(mapPrefix + entry.key, reader.location(entry.value))
        }
    }

    func child(_ key: String, table: [String: [String]]) -> MappingReader? {
        guard let value = node(key) else { return nil }
        let path = schemaPath.isEmpty ? key : "\(schemaPath).\(key)"
        return MappingReader(value, reader: reader, key: key, schemaPath: path, mapPrefix: mapPrefix + key + ".", table: table)
    }

    private func fail(_ key: String, _ expected: String, _ node: Node) {
        reader.bag.error(reader.location(node), "`\(key)` must be \(expected), not \(reader.describe(node))")
    }

    // MARK: Typed values

    func string(_ key: String) -> String? {
        guard let value = node(key) else { return nil }
        return reader.text(value, key: key, expected: "a string")
    }

    /// A string that must not be empty.
    func nonEmptyString(_ key: String) -> String? {
        guard let value = node(key), let text = reader.text(value, key: key, expected: "a string") else { return nil }
        guard !text.isEmpty else {
            fail(key, "a non-empty string", value)
            return nil
        }
        return text
    }

    func bool(_ key: String) -> Bool? {
        guard let value = node(key) else { return nil }
        if case .scalar(let scalar) = value, scalar.style == .plain {
            switch scalar.string {
            case "true", "True", "TRUE": return true
            case "false", "False", "FALSE": return false
            default: break
            }
        }
        fail(key, "true or false", value)
        return nil
    }

    func int(_ key: String, atLeast minimum: Int = 0) -> Int? {
        guard let value = node(key), let text = reader.text(value, key: key, expected: "an integer") else { return nil }
        guard let number = Int(text), number >= minimum else {
            fail(key, minimum == 0 ? "a whole number ≥ 0" : "a whole number ≥ \(minimum)", value)
            return nil
        }
        return number
    }

    func duration(_ key: String, allowZero: Bool = true) -> Duration? {
        guard let value = node(key), let text = reader.text(value, key: key, expected: DurationText.expectation) else { return nil }
        guard let duration = DurationText.parse(text) else {
            fail(key, DurationText.expectation, value)
            return nil
        }
        if !allowZero, duration == .zero {
            fail(key, "a duration greater than 0", value)
            return nil
        }
        return duration
    }

    func date(_ key: String, bound: DateText.Bound) -> Date? {
        guard let value = node(key), let text = reader.text(value, key: key, expected: DateText.expectation) else { return nil }
        guard let date = DateText.parse(text, bound: bound) else {
            fail(key, DateText.expectation, value)
            return nil
        }
        return date
    }

    func choice<E: RawRepresentable & CaseIterable>(_ key: String, _ type: E.Type = E.self) -> E? where E.RawValue == String {
        let names = E.allCases.map { "`\($0.rawValue)`" }.joined(separator: ", ")
        guard let value = node(key), let text = reader.text(value, key: key, expected: "one of \(names)") else { return nil }
        guard let choice = E(rawValue: text) else {
            fail(key, "one of \(names)", value)
            return nil
        }
        return choice
    }

    /// A file path, resolved against the directory of this file.
    func path(_ key: String) -> String? {
        guard let text = nonEmptyString(key) else { return nil }
        return PathResolution.resolve(text, against: reader.directory)
    }

    func hostPort(_ key: String) -> HostPort? {
        guard let value = node(key), let text = reader.text(value, key: key, expected: HostPort.expectation) else { return nil }
        guard let hostPort = HostPort(parsing: text, allowingPortZero: true) else {
            fail(key, HostPort.expectation, value)
            return nil
        }
        return hostPort
    }

    func tlsVersion(_ key: String) -> TLSVersion? {
        guard let value = node(key), let text = reader.text(value, key: key, expected: "a TLS version") else { return nil }
        guard let version = TLSVersion(parsing: text) else {
            reader.bag.error(reader.location(value), "unknown TLS version `\(text)` for `\(key)` (expected \"1.0\", \"1.1\", \"1.2\" or \"1.3\")")
            return nil
        }
        return version
    }

    /// The items of a list; a single scalar counts as a list of one when `scalarAsList`.
    func list(_ key: String, scalarAsList: Bool = false) -> [Node]? {
        guard let value = node(key) else { return nil }
        switch value {
        case .sequence(let sequence): return Array(sequence)
        case .scalar where scalarAsList: return [value]
        default:
            fail(key, "a list", value)
            return nil
        }
    }

    /// TCP ports (1–65535), a list or one number; each bad item is an error
    /// at that item, an empty list one at the key. Repeats are dropped.
    func ports(_ key: String) -> [Int]? {
        guard let items = list(key, scalarAsList: true) else { return nil }
        if items.isEmpty {
            reader.bag.error(valueLocation(key), "`\(key)` lists no port: name at least one (1–65535), or write `action: deny` to refuse the host")
            return nil
        }
        var ports: [Int] = []
        for item in items {
            guard let text = reader.text(item, key: key, expected: "a port number (1–65535)") else { continue }
            guard let port = Int(text), (1...65_535).contains(port) else {
                reader.bag.error(reader.location(item), "`\(key)` must list port numbers from 1 to 65535, not \(reader.describe(item))")
                continue
            }
            if !ports.contains(port) { ports.append(port) }
        }
        return ports
    }

    func strings(_ key: String) -> [String]? {
        guard let items = list(key) else { return nil }
        return items.compactMap { reader.text($0, key: key, expected: "a string") }
    }

    /// Bare host names (`admin.hosts`): no scheme, port, path or space;
    /// lowercased, a trailing dot dropped.
    func hostNames(_ key: String) -> [String]? {
        guard let items = list(key) else { return nil }
        return items.compactMap { item -> String? in
            guard let text = reader.text(item, key: key, expected: "a host name") else { return nil }
            var name = text.lowercased()
            if name.hasSuffix(".") { name.removeLast() }
            let bad = name.isEmpty || name.contains { "/: @[]".contains($0) || $0.isWhitespace }
            guard !bad else {
                reader.bag.error(reader.location(item), "`\(key)`: `\(text)` is not a host name; write the name alone (`pinproxy.internal`), without scheme or port")
                return nil
            }
            return name
        }
    }

    func cidrs(_ key: String) -> [CIDR]? {
        guard let items = list(key) else { return nil }
        return items.compactMap { item -> CIDR? in
            guard let text = reader.text(item, key: key, expected: "a CIDR") else { return nil }
            do throws(CIDRParseError) {
                return try CIDR(parsing: text)
            } catch {
                reader.bag.error(reader.location(item), error.message)
                return nil
            }
        }
    }
}
