/// Every credential a policy's `auth` names must exist (under `credentials:`
/// or `spotify.sessions`), and every identity `by_client` maps must be one of
/// `clients.identities`: a typo would otherwise send a request without its
/// credential, or with another's. Each at the name's own line and column.
struct CredentialNames {
    let config: PinproxyConfig

    func validate(_ auth: AuthPolicy, _ map: SourceMap, into bag: DiagnosticBag) {
        let known = Array(config.credentialKinds.keys)
        switch auth.choice {
        case .named(let name):
            let key = map.isWritten("auth.spotify") ? "auth.spotify" : "auth.credential"
            if config.credentialKinds[name] == nil {
                bag.error(map[key], key == "auth.spotify" ? unknownSessionMessage(name, known: Array(config.spotify.sessions.keys))
                                                           : unknownCredentialMessage(name, known: known))
            }
        case .byClient(let clients, let fallback, _):
            let identities = config.identities.keys.sorted()
            for (identity, name) in clients.sorted(by: { $0.key < $1.key }) {
                if config.credentialKinds[name] == nil {
                    bag.error(map["auth.by_client.\(identity)"], unknownCredentialMessage(name, known: known))
                }
                if config.identities[identity] == nil {
                    let hint = KeySuggestion.nearest(to: identity, in: identities).map { "; did you mean `\($0)`?" }
                        ?? (identities.isEmpty ? ": `clients.identities` defines none" : "; defined: \(identities.joined(separator: ", "))")
                    bag.error(map["auth.by_client.\(identity)"], "`by_client` maps unknown client identity `\(identity)`\(hint)")
                }
            }
            if let fallback, config.credentialKinds[fallback] == nil {
                bag.error(map["auth.default"], unknownCredentialMessage(fallback, known: known) + " (or write `default: none`)")
            }
        }
    }
}

/// Shared by every place that names a credential.
public func unknownCredentialMessage(_ name: String, known: [String]) -> String {
    if known.isEmpty {
        return "unknown credential `\(name)`: neither `credentials:` nor `spotify.sessions` defines any"
    }
    let hint = KeySuggestion.nearest(to: name, in: known).map { "; did you mean `\($0)`?" }
        ?? "; defined: \(known.sorted().joined(separator: ", "))"
    return "unknown credential `\(name)`\(hint)"
}
