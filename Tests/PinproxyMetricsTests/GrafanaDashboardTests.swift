import Foundation
import PinproxyMetrics
import PinproxyTestSupport
import Testing

/// examples/grafana/pinproxy.json (docs/contract.md §13): every query parses in
/// Prometheus's own tool, and names only metrics pinproxy exports.
@Suite(.blockingWaits)
struct GrafanaDashboardTests {
    /// Every `expr` of every panel (rows' panels included), with Grafana's
    /// variables replaced by what they stand for, so promtool sees PromQL.
    static func queries() throws -> [(panel: String, expr: String)] {
        let data = try Data(contentsOf: URL(fileURLWithPath: Promtool.repositoryRoot + "/examples/grafana/pinproxy.json"))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        var panels = dashboard["panels"] as? [[String: Any]] ?? []
        panels += panels.flatMap { $0["panels"] as? [[String: Any]] ?? [] }
        return panels.flatMap { panel in
            (panel["targets"] as? [[String: Any]] ?? []).compactMap { target in
                (target["expr"] as? String).map { expr in
                    (panel["title"] as? String ?? "?", expr
                        .replacingOccurrences(of: "$__rate_interval", with: "5m")
                        .replacingOccurrences(of: "$__range", with: "1h")
                        .replacingOccurrences(of: "$instance", with: ".*"))
                }
            }
        }
    }

    /// The metric names a running pinproxy exposes: each family's `# TYPE`
    /// line, with a histogram's `_bucket`, `_sum` and `_count` series.
    static func exportedNames() throws -> Set<String> {
        let fixture = try MetricsFixture()
        let store = try fixture.store()
        let metrics = PinproxyMetrics()
        metrics.observe(store)
        metrics.buildInfo(version: "0.0.0")
        metrics.updatePinExpiry(store.snapshot, now: Date())
        let host = try #require(store.snapshot.policies.first).hostLabel
        metrics.requestCompleted(host: host, code: 200, duration: .milliseconds(5))
        metrics.upstreamHandshake(host: host, result: .ok, duration: .milliseconds(5))
        metrics.upstreamCertExpiry(host: host, at: Date())
        metrics.upstreamTLS(host: host, version: "TLSv1.3", cipher: "TLS_AES_128_GCM_SHA256")
        metrics.probe(host: host, success: true)
        metrics.tokenExpiry(session: "app", at: Date())
        metrics.refreshTokenIssued(session: "app", at: Date())
        metrics.policyReload(result: .success, at: Date())
        metrics.mintedCertificate()
        var names = Set<String>()
        for line in metrics.exposition().split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let parts = line.split(separator: " ")
            guard parts.count == 4 else { continue }
            let name = String(parts[2])
            names.insert(name)
            if parts[3] == "histogram" { names.formUnion(["_bucket", "_sum", "_count"].map { name + $0 }) }
        }
        return names
    }

    @Test func everyQueryNamesOnlyExportedMetrics() throws {
        let queries = try Self.queries()
        #expect(queries.count >= 15, "the dashboard's panels were found")
        let exported = try Self.exportedNames()
        let regex = try NSRegularExpression(pattern: "pinproxy_[a-z_]+")
        var used = Set<String>()
        for (panel, expr) in queries {
            for match in regex.matches(in: expr, range: NSRange(expr.startIndex..., in: expr)) {
                let name = String(expr[Range(match.range, in: expr)!])
                used.insert(name)
                #expect(exported.contains(name), "\(panel): \(name) is not a metric pinproxy exports")
            }
        }
        // The list: traffic, refusals, verdicts, handshakes, expiry, tokens, reloads.
        for family in ["pinproxy_requests_total", "pinproxy_denied_total", "pinproxy_pin_validations_total",
                       "pinproxy_upstream_handshakes_total", "pinproxy_pin_expiry_timestamp_seconds",
                       "pinproxy_upstream_cert_expiry_timestamp_seconds", "pinproxy_token_expiry_timestamp_seconds",
                       "pinproxy_policy_reloads_total"] {
            #expect(used.contains(family), "no panel shows \(family)")
        }
    }

    @Test(.enabled(if: Promtool.path != nil, Promtool.missingMessage))
    func everyQueryPassesPromtool() throws {
        // Each query as a recording rule: `promtool check rules` parses every expression.
        let queries = try Self.queries()
        var rules = "groups:\n  - name: grafana\n    rules:\n"
        for (index, query) in queries.enumerated() {
            rules += "      - record: grafana:query_\(index)\n        expr: \(yamlSingleQuoted(query.expr))\n"
        }
        let dir = try TemporaryDirectory("pinproxy-grafana")
        let file = try dir.write("queries.yml", rules)
        let (status, output) = try ChildProcess.run(Promtool.path!, ["check", "rules", file])
        #expect(status == 0, "promtool check rules:\n\(output)\n\(rules)")
        #expect(output.contains("SUCCESS: \(queries.count) rules found"), "\(output)")
    }
}

/// A YAML single-quoted scalar: nothing is an escape but a doubled quote.
private func yamlSingleQuoted(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
}
