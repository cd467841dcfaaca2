import Foundation
import Yams

/// Reads `clients:` of the main file: the network ACL, the identities apps
/// authenticate as, and `require_identity` (docs/contract.md §15). A hash that
/// does not parse is a `check` error at its value, not a 407 at run time.
struct ClientsConfigReader {
    func read(_ clients: MappingReader, into config: inout PinproxyConfig) {
        let bag = clients.reader.bag
        clients.record(into: &config.sourceMap)
        if let v = clients.cidrs("allow") { config.clientsAllow = v }
        if let v = clients.bool("require_identity") { config.requireIdentity = v }
        guard let node = clients.node("identities"),
              let identities = MappingReader(node, reader: clients.reader, key: "identities", schemaPath: "clients.identities",
                                             mapPrefix: "clients.identities.", known: nil) else {
            if config.requireIdentity, clients.has("require_identity") {
                bag.error(clients.valueLocation("require_identity"), "`require_identity: true` needs `clients.identities`: no client could authenticate")
            }
            return
        }
        identities.record(into: &config.sourceMap)
        for entry in identities.entries {
            let location = clients.reader.location(entry.keyNode)
            if let problem = Self.nameProblem(entry.key) {
                bag.error(location, "identity name `\(entry.key)` \(problem)")
                continue
            }
            guard let m = MappingReader(entry.value, reader: clients.reader, key: entry.key, schemaPath: "clients.identities.*",
                                        mapPrefix: "clients.identities.\(entry.key).", table: ConfigKeys.main) else { continue }
            m.record(into: &config.sourceMap)
            if let identity = readIdentity(entry.key, m, at: location) {
                config.identities[entry.key] = identity
            }
        }
        if config.requireIdentity, config.identities.isEmpty, clients.has("require_identity") {
            bag.error(clients.valueLocation("require_identity"), "`require_identity: true` needs at least one identity under `clients.identities`")
        }
    }

    private func readIdentity(_ name: String, _ m: MappingReader, at location: SourceLocation) -> ClientIdentity? {
        let bag = m.reader.bag
        let from = m.cidrs("from") ?? []
        switch (m.has("password_hash"), m.has("password_hash_file")) {
        case (true, true):
            bag.error(m.keyLocation("password_hash_file"), "identity `\(name)`: give either `password_hash` or `password_hash_file`, not both")
            return nil
        case (false, false):
            bag.error(location, "identity `\(name)` needs `password_hash` (from `pinproxy passwd`) or `password_hash_file`")
            return nil
        case (true, false):
            guard let text = m.nonEmptyString("password_hash") else { return nil }
            return parse(text, name: name, key: "password_hash", at: m.valueLocation("password_hash"), from: from, bag: bag, identityAt: location)
        case (false, true):
            guard let path = m.path("password_hash_file") else { return nil }
            guard let data = FileBytes.read(path), let text = String(data: data, encoding: .utf8) else {
                bag.error(m.valueLocation("password_hash_file"), "identity `\(name)`: cannot read `password_hash_file` \(path)")
                return nil
            }
            return parse(text, name: name, key: "password_hash_file", at: m.valueLocation("password_hash_file"), from: from, bag: bag, identityAt: location)
        }
    }

    private func parse(_ text: String, name: String, key: String, at location: SourceLocation, from: [CIDR], bag: DiagnosticBag,
                       identityAt: SourceLocation) -> ClientIdentity? {
        do throws(PasswordHashError) {
            let hash = try PasswordHash(parsing: text)
            return ClientIdentity(name: name, passwordHash: hash, from: from, location: identityAt)
        } catch {
            // The hash itself is never echoed: it is brute-forceable.
            bag.error(location, "identity `\(name)`: `\(key)` \(error.message)")
            return nil
        }
    }

    /// Names travel in `Proxy-Authorization` (no `:`), in policies' `clients:`
    /// lists next to CIDRs (not an address), and as a metric label (`_` is
    /// reserved for pinproxy's own values such as `_anonymous`).
    static func nameProblem(_ name: String) -> String? {
        if name.isEmpty { return "is empty" }
        if name.hasPrefix("_") { return "may not start with `_` (reserved for labels such as `_anonymous`)" }
        let allowed = name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)) }
        if !allowed { return "may use only letters, digits, `-`, `_` and `.`" }
        if IPAddress.parse(name) != nil { return "looks like an address; a policy's `clients:` could not tell them apart" }
        return nil
    }
}
