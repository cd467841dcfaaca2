import PinproxyTLS

/// Builds each policy's upstream `TLSContext`, which is where OpenSSL judges
/// cipher strings, trust files and client keys. A failure is pinned to the
/// key that caused it by retrying the pieces alone: a bad `ciphers` line is
/// reported at `ciphers`, not at the policy, and its message starts with the
/// key (`tls.ciphers: …`), since OpenSSL's own words never name it.
struct PolicyCompiler {
    let config: PinproxyConfig

    func compile(_ specs: [HostPolicySpec], into bag: DiagnosticBag) -> [HostPolicy] {
        // One system store (and one per `ca_file`) for the whole set, not one per host.
        let trustStores = TrustStoreCache()
        return specs.compactMap { spec in
            guard let context = buildContext(spec, trustStores: trustStores, into: bag) else { return nil }
            let session = spec.auth.flatMap { config.tokenSessions[$0.spotifySession] }
            return HostPolicy(spec: spec, tlsContext: context, spotifySession: session)
        }
    }

    private func buildContext(_ spec: HostPolicySpec, trustStores: TrustStoreCache, into bag: DiagnosticBag) -> TLSContext? {
        let tls = spec.tls
        var chain: [Certificate] = []
        var key: PrivateKey?
        var failed = false
        if let path = tls.clientCertificate {
            do { chain = try Certificate.loadPEM(file: path) } catch {
                bag.error(spec.sourceMap["tls.client_cert"], "tls.client_cert: \(Self.reason(error))")
                failed = true
            }
        }
        if let path = tls.clientKey {
            do { key = try PrivateKey(pemFile: path) } catch {
                bag.error(spec.sourceMap["tls.client_key"], "tls.client_key: \(Self.reason(error))")
                failed = true
            }
        }
        var configuration = TLSConfiguration(
            role: .client,
            minimumVersion: tls.minimumVersion,
            maximumVersion: tls.maximumVersion,
            cipherList: tls.ciphers,
            cipherSuites: tls.ciphersuites,
            trustRoots: tls.caFile.map { .file($0) } ?? .system,
            certificateChain: chain,
            privateKey: key,
            applicationProtocols: spec.upstreamProtocol.alpn)
        if failed {
            // Still judge the ciphers and trust file, so every problem shows at once.
            configuration.certificateChain = []
            configuration.privateKey = nil
        }
        do {
            let context = try TLSContext(configuration: configuration, trustStores: trustStores)
            return failed ? nil : context
        } catch {
            let key = culprit(spec)
            bag.error(spec.sourceMap[key], "\(key): \(Self.reason(error))" + (key == "tls.ciphers" ? Self.suiteHint(tls.ciphers) : ""))
            return nil
        }
    }

    /// Which key broke the context (its dotted path): each suspect is tried on its own.
    private func culprit(_ spec: HostPolicySpec) -> String {
        let tls = spec.tls
        func fails(_ configuration: TLSConfiguration) -> Bool {
            (try? TLSContext(configuration: configuration)) == nil
        }
        if let ciphers = tls.ciphers {
            // Alone, then within the policy's versions (whether any cipher is left may depend on them).
            let versions = TLSConfiguration(role: .client, minimumVersion: tls.minimumVersion, maximumVersion: tls.maximumVersion)
            var withVersions = versions
            withVersions.cipherList = ciphers
            if fails(TLSConfiguration(role: .client, cipherList: ciphers)) || (!fails(versions) && fails(withVersions)) {
                return "tls.ciphers"
            }
        }
        if let suites = tls.ciphersuites, fails(TLSConfiguration(role: .client, cipherSuites: suites)) {
            return "tls.ciphersuites"
        }
        if let caFile = tls.caFile, fails(TLSConfiguration(role: .client, trustRoots: .file(caFile))) {
            return "tls.ca_file"
        }
        if tls.clientCertificate != nil {
            return "tls.client_key"
        }
        return "tls"
    }

    /// A TLS 1.3 suite name (`TLS_AES_128_GCM_SHA256`) in `ciphers`, which
    /// takes only the OpenSSL cipher string of TLS 1.2 and below: say where it goes.
    static func suiteHint(_ ciphers: String?) -> String {
        let suites = (ciphers ?? "").split(whereSeparator: { ":, ".contains($0) }).filter { $0.hasPrefix("TLS_") }
        guard let first = suites.first else { return "" }
        return "; `\(first)` is a TLS 1.3 suite: list TLS 1.3 suites under `tls.ciphersuites`, "
            + "and keep `tls.ciphers` for the OpenSSL cipher string of TLS 1.2 and below (such as ECDHE+AESGCM)"
    }

    static func reason(_ error: Error) -> String {
        if let tls = error as? TLSError { return tls.reason }
        return "\(error)"
    }
}
