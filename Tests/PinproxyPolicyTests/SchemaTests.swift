import Foundation
import PinproxyPolicy
import Testing

/// The shipped JSON Schemas and the loaders know exactly the same keys.
struct SchemaTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// Property names per object path, in `ConfigKeys`' notation.
    static func keys(ofSchema file: String) throws -> [String: Set<String>] {
        let data = try Data(contentsOf: URL(fileURLWithPath: repository + "/etc/schema/" + file))
        let root = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(root["$schema"] as? String == "https://json-schema.org/draft/2020-12/schema")
        var result: [String: Set<String>] = [:]
        func walk(_ node: [String: Any], _ path: String) {
            if let properties = node["properties"] as? [String: Any] {
                #expect(node["additionalProperties"] as? Bool == false, "\(path) must set additionalProperties: false")
                result[path, default: []].formUnion(properties.keys)
                for (key, child) in properties {
                    if let child = child as? [String: Any] { walk(child, path.isEmpty ? key : "\(path).\(key)") }
                    #expect((child as? [String: Any])?["description"] != nil, "\(path).\(key) has no description")
                }
            }
            if let items = node["items"] as? [String: Any] { walk(items, path + "[]") }
            if let extra = node["additionalProperties"] as? [String: Any] { walk(extra, path + ".*") }
            for combinator in ["anyOf", "oneOf", "allOf"] {
                for option in node[combinator] as? [[String: Any]] ?? [] { walk(option, path) }
            }
        }
        walk(root, "")
        return result
    }

    @Test func mainSchemaMatchesTheLoader() throws {
        #expect(try Self.keys(ofSchema: "pinproxy.schema.json") == ConfigKeys.main.mapValues(Set.init))
    }

    @Test func policySchemaMatchesTheLoader() throws {
        #expect(try Self.keys(ofSchema: "policy.schema.json") == ConfigKeys.policy.mapValues(Set.init))
    }

    @Test(arguments: [("pinproxy.yaml", "schema/pinproxy.schema.json"), ("policies/spotify.yaml", "../schema/policy.schema.json")])
    func shippedFilesReferenceTheirSchema(file: String, schema: String) throws {
        let text = try String(contentsOfFile: Self.repository + "/etc/" + file, encoding: .utf8)
        #expect(text.split(separator: "\n").first == "# yaml-language-server: $schema=\(schema)")
        let directory = (Self.repository + "/etc/" + file as NSString).deletingLastPathComponent
        #expect(FileManager.default.fileExists(atPath: directory + "/" + schema))
    }
}
