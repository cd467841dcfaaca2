import Foundation

/// A reader for the Prometheus text format (0.0.4), enough for tests to
/// assert sample values instead of matching substrings.
public struct PrometheusText: Sendable {
    public struct Sample: Sendable, Hashable, CustomStringConvertible {
        public var name: String
        public var labels: [String: String]
        public var value: Double

        public var description: String {
            let rendered = labels.sorted { $0.key < $1.key }.map { "\($0.key)=\"\($0.value)\"" }.joined(separator: ",")
            return "\(name){\(rendered)} \(value)"
        }
    }

    public var samples: [Sample]
    /// `# TYPE` lines: metric family name → type.
    public var types: [String: String]

    public init(parsing text: String) throws {
        samples = []
        types = [:]
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty { continue }
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                guard parts.count == 4 else { throw TestSupportError("bad TYPE line: \(line)") }
                types[String(parts[2])] = String(parts[3])
                continue
            }
            if line.hasPrefix("#") { continue }
            samples.append(try Self.sample(line))
        }
    }

    private static func sample(_ line: String) throws -> Sample {
        var labels: [String: String] = [:]
        let name: String
        let rest: Substring
        if let brace = line.firstIndex(of: "{") {
            name = String(line[..<brace])
            var i = line.index(after: brace)
            while line[i] != "}" {
                guard let eq = line[i...].firstIndex(of: "="), line[line.index(after: eq)] == "\"" else {
                    throw TestSupportError("bad labels: \(line)")
                }
                let key = String(line[i..<eq]).trimmingCharacters(in: CharacterSet(charactersIn: ", "))
                var j = line.index(eq, offsetBy: 2)
                var value = ""
                while line[j] != "\"" {
                    if line[j] == "\\" {
                        j = line.index(after: j)
                        value.append(line[j] == "n" ? "\n" : line[j])
                    } else {
                        value.append(line[j])
                    }
                    j = line.index(after: j)
                }
                labels[key] = value
                i = line.index(after: j)
                if line[i] == "," { i = line.index(after: i) }
            }
            rest = line[line.index(after: i)...]
        } else {
            guard let space = line.firstIndex(of: " ") else { throw TestSupportError("no value: \(line)") }
            name = String(line[..<space])
            rest = line[space...]
        }
        let valueText = rest.trimmingCharacters(in: .whitespaces).split(separator: " ").first.map(String.init) ?? ""
        let value: Double
        switch valueText.lowercased() {
        case "+inf", "inf": value = .infinity
        case "-inf": value = -.infinity
        case "nan": value = .nan
        default:
            guard let v = Double(valueText) else { throw TestSupportError("bad value: \(line)") }
            value = v
        }
        return Sample(name: name, labels: labels, value: value)
    }

    /// The value of the one sample named `name` whose labels include `labels`;
    /// nil when there is none. Fails loudly on an ambiguous match.
    public func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        let found = matching(name, labels)
        precondition(found.count <= 1, "\(name) \(labels) matches \(found)")
        return found.first?.value
    }

    public func matching(_ name: String, _ labels: [String: String] = [:]) -> [Sample] {
        samples.filter { sample in
            sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value }
        }
    }
}
