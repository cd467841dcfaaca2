import Foundation
import PinproxyTLS

/// A digest per host policy over a canonical rendering: every field that
/// changes behaviour, in a fixed order, and nothing that does not (source
/// locations, comments, key order). Editing a comment keeps the digest;
/// changing a pin's date changes it.
enum PolicyDigest {
    static func digest(of spec: HostPolicySpec) -> String {
        SHA256Digest.hash(Array(canonicalRendering(spec).utf8)).map { String(format: "%02x", $0) }.joined()
    }

    static func canonicalRendering(_ s: HostPolicySpec) -> String {
        var lines: [String] = []
        func put(_ key: String, _ value: Any?) {
            lines.append("\(key)=\(value.map { "\($0)" } ?? "null")")
        }
        func date(_ d: Date?) -> String? { d.map { String($0.timeIntervalSince1970) } }
        put("match", s.match.key)
        put("action", s.action.rawValue)
        put("upstream", s.upstream.map(\.description).joined(separator: ","))
        put("upgrade_to_tls", s.upgradeToTLS)
        // Only when not the default, so that digests written before the key existed stay.
        if s.websocket != .allow { put("websocket", s.websocket.rawValue) }
        if let ports = s.ports { put("ports", ports.map(String.init).joined(separator: ",")) }
        put("tls.min_version", s.tls.minimumVersion.rawValue)
        put("tls.allow_legacy_tls", s.tls.allowLegacyTLS)
        put("tls.max_version", s.tls.maximumVersion?.rawValue)
        put("tls.ciphers", s.tls.ciphers)
        put("tls.ciphersuites", s.tls.ciphersuites)
        put("tls.ca_file", s.tls.caFile)
        put("tls.client_cert", s.tls.clientCertificate)
        put("tls.client_key", s.tls.clientKey)
        if let pins = s.pins {
            put("pins.mode", pins.mode.rawValue)
            put("pins.on_expiry", pins.onExpiry.rawValue)
            for pin in pins.pins {
                put("pins.\(pin.kind.rawValue)", "\(pin.hash)|\(date(pin.notBefore) ?? "")|\(date(pin.notAfter) ?? "")")
            }
            put("pins.transition", pins.transition.map { "\(date($0.from)!)|\(date($0.until)!)" })
        } else {
            put("pins", nil)
        }
        if let auth = s.auth {
            put("auth", "\(auth.spotifySession)|\(auth.replaceClientAuth)|\(auth.attachUnpinned)")
            // Only what `credential:` adds, so the digests of older policies stay as they were.
            if auth.header != "Authorization" || auth.format != "Bearer {token}" { put("auth.header", "\(auth.header)|\(auth.format)") }
            if auth.throttleQueue > 0 { put("auth.throttle_queue", "\(auth.throttleQueue)") }
            if case .byClient(let map, let fallback, let require) = auth.choice {
                for (identity, name) in map.sorted(by: { $0.key < $1.key }) { put("auth.by_client", "\(identity)=\(name)") }
                put("auth.default", "\(fallback ?? "none")|\(require)")
            }
        } else {
            put("auth", nil)
        }
        if let limit = s.rateLimit { put("rate_limit", "\(limit.requestsPerSecond)|\(limit.burst)|\(limit.per.rawValue)") }
        for field in s.headers.set { put("headers.set", "\(field.name):\(field.value)") }
        put("headers.remove", s.headers.remove.joined(separator: ","))
        put("connect_timeout", DurationText.format(s.connectTimeout))
        put("handshake_timeout", DurationText.format(s.handshakeTimeout))
        put("response_timeout", DurationText.format(s.responseTimeout))
        put("retries", s.retries)
        put("max_upstream_connections", s.maxUpstreamConnections)
        put("queue_timeout", DurationText.format(s.queueTimeout))
        put("probe_interval", DurationText.format(s.probeInterval))
        put("clients", s.clients.map { $0.map(\.description).joined(separator: ",") })
        // The parent's credentials count too (a changed password retires pooled tunnels), hashed.
        put("upstream_proxy", s.upstreamProxy.map { proxy in
            "\(proxy)|\(proxy.credentials.map { SHA256Digest.base64(Array($0.reveal().utf8)) } ?? "")"
        })
        put("upstream_protocol", s.upstreamProtocol.rawValue)
        return lines.joined(separator: "\n")
    }
}
