import Foundation
import Yams

/// Reads the policy files: every `*.yaml`/`*.yml` of a directory in name
/// order (so duplicates are reported the same way on every machine), or one
/// file. Yields `HostPolicySpec`s with defaults applied; cross-policy checks
/// (duplicates, sessions, timelines) are `PolicyValidator`'s.
struct PolicyFileLoader {
    let environment: [String: String]

    /// The policy files `path` names, or nil (and an error) when it does not exist.
    static func files(at path: String, location: SourceLocation, into bag: DiagnosticBag) -> [String]? {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            bag.error(location, "policies path \(path) does not exist")
            return nil
        }
        guard isDirectory.boolValue else { return [path] }
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else {
            bag.error(location, "cannot list policies directory \(path)")
            return nil
        }
        return names.filter { ($0.hasSuffix(".yaml") || $0.hasSuffix(".yml")) && !$0.hasPrefix(".") }
            .sorted()
            .map { (path as NSString).appendingPathComponent($0) }
    }

    /// A policy file must say `hosts:` with a list. A file with nothing in it
    /// (zero bytes, blanks, comments only) or a `hosts:` with no value is what
    /// an editor or a deploy leaves halfway through rewriting the file: it is
    /// an error, so a reload keeps the last good set rather than serving a set
    /// with this file's hosts missing. `hosts: []` says "none" on purpose.
    func load(file: String, into bag: DiagnosticBag) -> [HostPolicySpec] {
        guard let document = YAMLDocument.load(file: file, into: bag) else { return [] }
        guard let root = document.root else {
            bag.error(.file(file), "policy file \(file) is empty: it needs `hosts:` with a list of host policies (write `hosts: []` for a file that has none on purpose)")
            return []
        }
        let reader = NodeReader(file: file, environment: environment, bag: bag)
        guard let top = MappingReader(root, reader: reader, key: "a policy file", schemaPath: "", mapPrefix: "", table: ConfigKeys.policy) else {
            return []
        }
        guard top.entries.contains(where: { $0.key == "hosts" }) else {
            bag.error(top.location, "a policy file needs `hosts:` with a list of host policies (write `hosts: []` for a file that has none on purpose)")
            return []
        }
        guard top.has("hosts") else {
            bag.error(top.keyLocation("hosts"), "`hosts` has no value: list the host policies under it, or write `hosts: []` for a file that has none on purpose")
            return []
        }
        guard let hosts = top.list("hosts") else { return [] }
        return hosts.compactMap { node in
            guard let entry = MappingReader(node, reader: reader, key: "hosts[]", schemaPath: "hosts[]", mapPrefix: "", table: ConfigKeys.policy) else {
                return nil
            }
            return HostPolicyReader(entry: entry, file: file).read()
        }
    }
}

/// One `hosts:` entry.
private struct HostPolicyReader {
    let entry: MappingReader
    let file: String
    var bag: DiagnosticBag { entry.reader.bag }
    let table = ConfigKeys.policy

    func read() -> HostPolicySpec? {
        var map = SourceMap(origin: entry.location)
        entry.record(into: &map)
        guard entry.has("match") else {
            bag.error(entry.location, "a host policy needs `match` (a host name, `*.x.com` or `**.x.com`)")
            return nil
        }
        var pattern: HostPattern?
        if let text = entry.nonEmptyString("match") {
            do throws(HostPatternError) {
                pattern = try HostPattern(parsing: text)
            } catch {
                bag.error(entry.valueLocation("match"), error.message)
            }
        }
        map.origin = entry.valueLocation("match")
        let action = entry.has("action") ? entry.choice("action", HostPolicySpec.Action.self) : .intercept
        let upstream = readUpstream()
        let tls = readTLS(&map)
        let pins = readPins(&map)
        let auth = readAuth(&map)
        let headers = readHeaders(&map)
        var rateLimit: RateLimitPolicy?
        if let limit = entry.child("rate_limit", table: table) { rateLimit = RateLimitReader().read(limit, into: &map) }
        var spec = HostPolicySpec(
            match: pattern ?? (try! HostPattern(parsing: "invalid.invalid")),
            action: action ?? .intercept,
            upstream: upstream,
            upgradeToTLS: entry.bool("upgrade_to_tls") ?? false,
            tls: tls,
            pins: pins,
            auth: auth,
            headers: headers,
            connectTimeout: entry.duration("connect_timeout", allowZero: false) ?? HostPolicyDefaults.connectTimeout,
            handshakeTimeout: entry.duration("handshake_timeout", allowZero: false) ?? HostPolicyDefaults.handshakeTimeout,
            responseTimeout: entry.duration("response_timeout", allowZero: false) ?? HostPolicyDefaults.responseTimeout,
            retries: entry.int("retries") ?? HostPolicyDefaults.retries,
            maxUpstreamConnections: entry.int("max_upstream_connections", atLeast: 1) ?? HostPolicyDefaults.maxUpstreamConnections,
            queueTimeout: entry.duration("queue_timeout") ?? HostPolicyDefaults.queueTimeout,
            probeInterval: entry.duration("probe_interval") ?? .seconds(600),
            websocket: entry.has("websocket") ? entry.choice("websocket", HostPolicySpec.WebSocket.self) ?? .allow : .allow,
            upstreamProtocol: entry.choice("upstream_protocol", HostPolicySpec.UpstreamProtocol.self) ?? .auto,
            file: file,
            sourceMap: map)
        spec.clients = readClients()
        spec.upstreamProxy = readUpstreamProxy()
        spec.ports = entry.ports("ports")
        spec.rateLimit = rateLimit
        if spec.ports != nil, spec.action == .deny {
            bag.warning(entry.keyLocation("ports"), "`ports` has no effect on a policy with `action: deny`: every port of the host is refused")
        }
        // A policy whose pattern did not parse is reported and dropped.
        return pattern == nil ? nil : spec
    }

    private func readUpstream() -> [HostPort] {
        guard let items = entry.list("upstream", scalarAsList: true) else { return [] }
        return items.compactMap { item in
            guard let text = entry.reader.text(item, key: "upstream", expected: HostPort.expectation) else { return nil }
            guard let hostPort = HostPort(parsing: text) else {
                bag.error(entry.reader.location(item), "`upstream` must be \(HostPort.expectation), not `\(text)`")
                return nil
            }
            return hostPort
        }
    }

    /// `clients:` (docs/contract.md §15): identity names and CIDRs; which
    /// names exist is `PolicyValidator`'s check (it has the main file).
    private func readClients() -> [ClientRule]? {
        guard entry.has("clients") else { return nil }
        guard let items = entry.list("clients", scalarAsList: true) else { return [] }
        return items.compactMap { item in
            guard let text = entry.reader.text(item, key: "clients", expected: "an identity name or a CIDR") else { return nil }
            let location = entry.reader.location(item)
            if text.contains("/"), (try? CIDR(parsing: text)) == nil {
                do throws(CIDRParseError) { _ = try CIDR(parsing: text) } catch { bag.error(location, "`clients`: \(error.message)") }
                return nil
            }
            return ClientRule.parse(text, location: location)
        }
    }

    private func readUpstreamProxy() -> UpstreamProxy? {
        guard let text = entry.nonEmptyString("upstream_proxy") else { return nil }
        do throws(UpstreamProxyError) {
            return try UpstreamProxy(parsing: text)
        } catch {
            // The value may hold a password (after ${VAR} expansion): not echoed.
            bag.error(entry.valueLocation("upstream_proxy"), "`upstream_proxy` \(error.message)")
            return nil
        }
    }

    private func readTLS(_ map: inout SourceMap) -> TLSPolicy {
        var tls = TLSPolicy.defaults
        guard let m = entry.child("tls", table: table) else { return tls }
        m.record(into: &map)
        if let v = m.tlsVersion("min_version") { tls.minimumVersion = v }
        tls.allowLegacyTLS = m.bool("allow_legacy_tls") ?? false
        tls.maximumVersion = m.tlsVersion("max_version")
        tls.ciphers = m.nonEmptyString("ciphers")
        tls.ciphersuites = m.nonEmptyString("ciphersuites")
        tls.caFile = m.path("ca_file")
        tls.clientCertificate = m.path("client_cert")
        tls.clientKey = m.path("client_key")
        if tls.minimumVersion.isLegacy, !tls.allowLegacyTLS {
            bag.error(m.valueLocation("min_version"), "TLS \(tls.minimumVersion.rawValue) is legacy: set `allow_legacy_tls: true` to allow it")
        } else if tls.minimumVersion.isLegacy {
            bag.warning(m.valueLocation("min_version"), "TLS \(tls.minimumVersion.rawValue) is below 1.2: the upstream leg may negotiate a legacy protocol")
        }
        if let max = tls.maximumVersion, max < tls.minimumVersion {
            bag.error(m.valueLocation("max_version"), "`max_version` \(max.rawValue) is below `min_version` \(tls.minimumVersion.rawValue)")
        } else if let max = tls.maximumVersion, max.isLegacy, !tls.allowLegacyTLS {
            bag.error(m.valueLocation("max_version"), "TLS \(max.rawValue) is legacy: set `allow_legacy_tls: true` to allow it")
        }
        if (tls.clientCertificate == nil) != (tls.clientKey == nil) {
            let missing = tls.clientCertificate == nil ? "client_cert" : "client_key"
            let given = tls.clientCertificate == nil ? "client_key" : "client_cert"
            bag.error(m.keyLocation(given), "`\(given)` needs `\(missing)` too (mTLS towards the upstream)")
        }
        return tls
    }

    private func readPins(_ map: inout SourceMap) -> PinPolicy? {
        guard let m = entry.child("pins", table: table) else { return nil }
        m.record(into: &map)
        var pins = PinPolicy(pins: [], location: entry.keyLocation("pins"))
        pins.mode = m.choice("mode", PinPolicy.Mode.self) ?? .enforce
        pins.onExpiry = m.choice("on_expiry", PinPolicy.OnExpiry.self) ?? .fail
        for kind in [Pin.Kind.spki, .certificate] {
            for item in m.list(kind.rawValue) ?? [] {
                if let pin = readPin(item, kind: kind) { pins.pins.append(pin) }
            }
        }
        if let t = m.child("transition", table: table) {
            t.record(into: &map)
            for required in ["from", "until"] where !t.has(required) {
                bag.error(t.location, "`transition` needs `\(required)`")
            }
            if let from = t.date("from", bound: .start), let until = t.date("until", bound: .end) {
                if until < from {
                    bag.error(t.valueLocation("until"), "window ends before it starts: `until` \(DateText.format(until)) is before `from` \(DateText.format(from))")
                } else {
                    pins.transition = TimeWindow(from: from, until: until, location: t.valueLocation("until"))
                }
            }
        }
        return pins
    }

    private func readPin(_ node: Node, kind: Kind) -> Pin? {
        guard let m = MappingReader(node, reader: entry.reader, key: "\(kind.rawValue)[]", schemaPath: "hosts[].pins.\(kind.rawValue)[]",
                                    mapPrefix: "", table: table) else { return nil }
        guard m.has("pin") else {
            bag.error(m.location, "a `\(kind.rawValue)` entry needs `pin` (base64 SHA-256, optionally `sha256/`-prefixed)")
            return nil
        }
        var hash: String?
        if let text = m.string("pin") {
            hash = Pin.canonicalHash(text)
            if hash == nil {
                bag.error(m.valueLocation("pin"), "pin `\(text)` is not 32 bytes of base64 (a SHA-256, optionally `sha256/`-prefixed)")
            }
        }
        let notBefore = m.date("not_before", bound: .start)
        let notAfter = m.date("not_after", bound: .end)
        if let notBefore, let notAfter, notAfter < notBefore {
            bag.error(m.valueLocation("not_after"), "window ends before it starts: `not_after` \(DateText.format(notAfter)) is before `not_before` \(DateText.format(notBefore))")
            return nil
        }
        guard let hash else { return nil }
        return Pin(kind: kind, hash: hash, notBefore: notBefore, notAfter: notAfter, note: m.string("note"),
                   location: m.valueLocation("pin"))
    }

    typealias Kind = Pin.Kind

    private func readAuth(_ map: inout SourceMap) -> AuthPolicy? {
        guard let m = entry.child("auth", table: table) else { return nil }
        return AuthPolicyReader().read(m, into: &map)
    }

    private func readHeaders(_ map: inout SourceMap) -> HeaderRules {
        var rules = HeaderRules.none
        guard let m = entry.child("headers", table: table) else { return rules }
        m.record(into: &map)
        if let setNode = m.node("set"),
           let set = MappingReader(setNode, reader: entry.reader, key: "set", schemaPath: "hosts[].headers.set", mapPrefix: "headers.set.", known: nil) {
            for field in set.entries {
                guard let value = entry.reader.text(field.value, key: field.key, expected: "a header value (string)") else { continue }
                guard isToken(field.key) else {
                    bag.error(entry.reader.location(field.keyNode), "`\(field.key)` is not a valid HTTP header name")
                    continue
                }
                guard !value.contains(where: { $0 == "\r" || $0 == "\n" }) else {
                    bag.error(entry.reader.location(field.value), "a header value may not contain a line break")
                    continue
                }
                rules.set.append(.init(name: field.key, value: value))
            }
        }
        rules.remove = m.strings("remove") ?? []
        return rules
    }

    private func isToken(_ name: String) -> Bool {
        !name.isEmpty && name.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "!#$%&'*+-.^_`|~".unicodeScalars.contains($0)) }
    }
}
