import Foundation

/// An end-to-end test's world in a few lines: a temp dir, a PKI for the names
/// the test uses, one TLS upstream (`TestUpstream`) serving them, policies
/// declared as `Scenario.Host` values, and the real `pinproxy run` in front.
///
///     let s = try await Scenario("pinproxy-ports", names: ["api.test", "tunnel.test"], hosts: [
///         .intercept("api.test", "upgrade_to_tls: true"),
///         .tunnel("tunnel.test"),
///     ])
///     let served = try s.curl("https://api.test/")
///
/// A host's upstream is the scenario's `TestUpstream` unless it names
/// another port; an intercepted host trusts the PKI's root and is not probed.
/// What a suite needs beyond this (a second upstream, extra policy files)
/// it adds through `dir` and `before` before the proxy starts.
public final class Scenario: @unchecked Sendable {
    public let dir: TemporaryDirectory
    public let pki: TestPKI
    public let upstream: TestUpstream
    public let proxy: ProxyHarness

    /// Loopback upstreams are denied unless allowed: every scenario allows them.
    public static let loopbackAllowed = "network:\n  allow: [127.0.0.0/8]\n"

    /// - Parameters:
    ///   - mainConfig: more of `pinproxy.yaml` (the loopback allowance is always added).
    ///   - before: runs after the upstream starts and before the proxy does
    ///     (extra policy files, a second upstream's port written somewhere).
    public init(_ name: String, names: [String], hosts: [Host], mainConfig: String = "",
                before: (TemporaryDirectory, TestPKI, TestUpstream) throws -> Void = { _, _, _ in }) async throws {
        dir = try TemporaryDirectory(name)
        pki = try TestPKI.make(in: dir, names: names)
        upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
        try before(dir, pki, upstream)
        let policies = Self.policies(hosts, upstreamPort: upstream.port, caFile: pki.rootCertificate)
        proxy = try ProxyHarness(policies: policies, mainConfig: Self.loopbackAllowed + mainConfig, directory: dir)
    }

    /// curl through the proxy, trusting pinproxy's CA unless `caFile` says otherwise.
    public func curl(_ url: String, caFile: String? = nil, _ extra: [String] = []) throws -> CurlResult {
        try Curl.run(url, proxy: proxy, caFile: caFile, extra: extra, directory: dir)
    }

    /// A raw client on the proxy's port, for what curl will not send.
    public func rawClient() throws -> RawClient {
        try RawClient(port: proxy.port)
    }

    /// One value of the proxy's `/metrics` (nil when the series is absent).
    public func metric(_ name: String, _ labels: [String: String] = [:]) throws -> Double? {
        let scrape = try Curl.run("http://127.0.0.1:\(try proxy.adminPort)/metrics", proxyURL: nil, caFile: nil, directory: dir)
        return try PrometheusText(parsing: scrape.body).value(name, labels)
    }

    /// A pin no certificate has: the backup a pin list needs beside the real one.
    public static let backupPin = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

    /// A host's `pins:` line for these SPKI pins (base64).
    public static func pins(_ pins: String...) -> String {
        "pins: { spki_sha256: [" + pins.map { "{pin: \"\($0)\"}" }.joined(separator: ", ") + "] }"
    }

    /// The policy file's text for `hosts` (also for suites whose upstreams are
    /// other servers: they name each one's port, and `upstreamPort` is not needed).
    public static func policies(_ hosts: [Host], upstreamPort: Int? = nil, caFile: String) -> String {
        "hosts:\n" + hosts.map { $0.yaml(upstreamPort: upstreamPort, caFile: caFile) }.joined()
    }

    /// One host policy: its `match`, action, upstream and any further keys.
    public struct Host: Sendable {
        public enum Upstream: Sendable {
            /// The scenario's `TestUpstream`.
            case scenario
            /// Another loopback port (a scripted upstream, one that refuses).
            case port(Int)
            /// No `upstream:` key: the host's own address is dialled.
            case none
        }

        public var match: String
        public var action: String
        public var upstream: Upstream
        /// Intercepted hosts trust the PKI's root and are not probed.
        public var trustsScenarioRoot: Bool
        /// Further keys, one YAML line each (`response_timeout: 1s`).
        public var lines: [String]

        public static func intercept(_ match: String, upstream: Upstream = .scenario, _ lines: String...) -> Host {
            Host(match: match, action: "intercept", upstream: upstream, trustsScenarioRoot: true, lines: lines)
        }

        public static func tunnel(_ match: String, upstream: Upstream = .scenario, _ lines: String...) -> Host {
            Host(match: match, action: "tunnel", upstream: upstream, trustsScenarioRoot: false, lines: lines)
        }

        public static func deny(_ match: String, _ lines: String...) -> Host {
            Host(match: match, action: "deny", upstream: .none, trustsScenarioRoot: false, lines: lines)
        }

        func yaml(upstreamPort: Int?, caFile: String) -> String {
            var keys = ["action: \(action)"]
            switch upstream {
            case .scenario:
                guard let upstreamPort else { preconditionFailure("\(match): no scenario upstream; name the port") }
                keys.append("upstream: 127.0.0.1:\(upstreamPort)")
            case .port(let port): keys.append("upstream: 127.0.0.1:\(port)")
            case .none: break
            }
            if trustsScenarioRoot {
                keys.append("tls: { ca_file: \(caFile) }")
                if !lines.contains(where: { $0.hasPrefix("probe_interval:") }) { keys.append("probe_interval: 0") }
            }
            keys += lines
            return "  - match: \(match)\n" + keys.map { "    \($0)\n" }.joined()
        }
    }
}
