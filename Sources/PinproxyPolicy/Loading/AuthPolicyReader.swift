/// Reads a policy's `auth:` (docs/contract.md §3 `auth`): exactly one of
/// `credential`, `spotify` (its older spelling) or `by_client`; the header
/// and its format; the rules of when a credential goes up.
struct AuthPolicyReader {
    func read(_ m: MappingReader, into map: inout SourceMap) -> AuthPolicy? {
        let bag = m.reader.bag
        m.record(into: &map)
        let given = ["credential", "spotify", "by_client"].filter(m.has)
        guard given.count == 1 else {
            if given.isEmpty {
                bag.error(m.location, "`auth` needs `credential` (the name of an entry under `credentials:` or `spotify.sessions`), or `by_client` (a credential per client identity)")
            } else {
                bag.error(m.keyLocation(given[1]), "`auth` takes one of `credential`, `spotify` and `by_client`, not both `\(given[0])` and `\(given[1])`")
            }
            return nil
        }
        if given[0] != "by_client" {
            for key in ["default", "require"] where m.has(key) {
                bag.error(m.keyLocation(key), "`\(key)` applies only with `by_client`: `\(given[0])` gives every client the same credential")
            }
        }
        let header: String? = header(m) ?? nil
        let format: String? = format(m) ?? nil
        let replace = m.bool("replace_client_auth") ?? true
        let attach = m.bool("attach_unpinned") ?? false
        let throttleQueue = m.int("throttle_queue") ?? 0
        if throttleQueue > Self.longestThrottleQueue {
            bag.error(m.valueLocation("throttle_queue"),
                      "`throttle_queue` is at most \(Self.longestThrottleQueue): each waiting request holds a client connection; beyond the queue, requests get 429 `upstream_throttled` at once")
            return nil
        }
        let choice: AuthPolicy.Choice?
        switch given[0] {
        case "by_client": choice = byClient(m, into: &map)
        default: choice = m.nonEmptyString(given[0]).map(AuthPolicy.Choice.named)
        }
        guard let choice, let header, let format else { return nil }
        return AuthPolicy(choice: choice, header: header, format: format, replaceClientAuth: replace, attachUnpinned: attach,
                          throttleQueue: throttleQueue)
    }

    /// A bound on `throttle_queue`, so that a typo cannot park a million connections.
    static let longestThrottleQueue = 10_000

    private func header(_ m: MappingReader) -> String?? {
        guard m.has("header") else { return .some("Authorization") }
        guard let name = m.nonEmptyString("header") else { return .some(nil) }
        let token = name.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "!#$%&'*+-.^_`|~".unicodeScalars.contains($0))
        }
        guard token else {
            m.reader.bag.error(m.valueLocation("header"), "`\(name)` is not a valid HTTP header name (write e.g. `X-Api-Key`)")
            return .some(nil)
        }
        return .some(name)
    }

    private func format(_ m: MappingReader) -> String?? {
        guard m.has("format") else { return .some("Bearer {token}") }
        guard let format = m.nonEmptyString("format") else { return .some(nil) }
        guard format.contains("{token}") else {
            m.reader.bag.error(m.valueLocation("format"), "`format` must contain `{token}`, where the credential goes (e.g. \"token {token}\")")
            return .some(nil)
        }
        guard !format.contains(where: { $0 == "\r" || $0 == "\n" }) else {
            m.reader.bag.error(m.valueLocation("format"), "`format` may not contain a line break")
            return .some(nil)
        }
        return .some(format)
    }

    private func byClient(_ m: MappingReader, into map: inout SourceMap) -> AuthPolicy.Choice? {
        guard let node = m.node("by_client"),
              let clients = MappingReader(node, reader: m.reader, key: "by_client", schemaPath: "hosts[].auth.by_client",
                                          mapPrefix: m.mapPrefix + "by_client.", known: nil) else { return nil }
        clients.record(into: &map)
        var names: [String: String] = [:]
        for entry in clients.entries {
            guard let name = m.reader.text(entry.value, key: entry.key, expected: "a credential name"), !name.isEmpty else { continue }
            names[entry.key] = name
        }
        // `default: none` (or no `default`): an unmapped client's request goes without a credential.
        let fallback = m.nonEmptyString("default").flatMap { $0 == "none" ? nil : $0 }
        let require = m.bool("require") ?? false
        if require, m.has("default"), fallback != nil {
            m.reader.bag.warning(m.keyLocation("require"), "`require: true` has no effect with a `default` credential: every client gets one")
        }
        guard clients.entries.count == names.count else { return nil }
        return .byClient(names, fallback: fallback, require: require)
    }
}
