import Foundation
import NIOConcurrencyHelpers
import PinproxyAdmin
import PinproxyMetrics
import PinproxyPolicy
import PinproxyTestSupport
import Testing

/// docs/contract.md §5 and §10 over real HTTP on 127.0.0.1:0, with curl as the client.
struct AdminEndpointTests {
    /// api: one pin expired, one active (so no backup: a timeline warning),
    /// one not yet valid. cdn: tunnelled, no pins.
    static let policies = """
        hosts:
          - match: api.example.com
            action: intercept
            pins:
              spki_sha256:
                - pin: "\(AdminFixture.pin(1))"
                  not_after: 2026-01-01
                - pin: "sha256/\(AdminFixture.pin(2))"
                  not_after: 2027-03-01
              cert_sha256:
                - pin: "\(AdminFixture.pin(3))"
                  not_before: 2027-01-01T08:30:00Z
          - match: "**.cdn.example.com"
            action: tunnel
        """

    static let ready = AdminServer.Providers(readiness: {
        ReadinessStatus(listening: true, policyLoaded: true, caUsable: true)
    })

    @Test func healthzAndMetrics() async throws {
        let fixture = try AdminFixture(policies: Self.policies)
        let store = try fixture.store()
        let metrics = PinproxyMetrics()
        metrics.buildInfo(version: "test")
        try await withAdminServer(store: store, metrics: metrics, providers: Self.ready) { client in
            let health = try await client.get("/healthz")
            #expect(health.status == 200)
            #expect(health.headers["content-type"] == "application/json")
            #expect(try health.json() as NSDictionary == ["status": "ok"])

            let scrape = try await client.get("/metrics")
            #expect(scrape.status == 200)
            #expect(scrape.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
            let text = try PrometheusText(parsing: scrape.body)
            #expect(text.value("pinproxy_build_info", ["version": "test"]) == 1)
            // The server made the metrics observe the store: the host's series exist at 0.
            #expect(text.value("pinproxy_upstream_handshakes_total", ["host": "api.example.com", "result": "ok"]) == 0)
            #expect(text.value("pinproxy_bytes_total", ["host": "**.cdn.example.com", "direction": "up"]) == 0)
            // Coverage: pin 2 until 2027-03-01 hands over to the undated cert pin
            // (from 2027-01-01) without a gap, so it never ends.
            #expect(text.value("pinproxy_pin_expiry_timestamp_seconds", ["host": "api.example.com"]) == .infinity)
        }
    }

    @Test func readyzIs503UntilEveryCheckHolds() async throws {
        let fixture = try AdminFixture(policies: Self.policies)
        let state = ReadinessState()
        let details = NIOLockedValueBox<[String]>([])
        let providers = AdminServer.Providers(
            readiness: { state.status }, readinessDetails: { details.withLockedValue { $0 } })
        try await withAdminServer(store: try fixture.store(), providers: providers) { client in
            var answer = try await client.get("/readyz")
            #expect(answer.status == 503)
            var json = try answer.json()
            #expect(json["status"] as? String == "not_ready")
            #expect(json["missing"] as? [String] == ["listening", "policy_loaded", "ca_usable"])

            state.setPolicyLoaded(true)
            state.setListening(true)
            answer = try await client.get("/readyz")
            #expect(answer.status == 503)
            json = try answer.json()
            #expect(json["missing"] as? [String] == ["ca_usable"])
            #expect((json["checks"] as? [String: Bool]) == ["listening": true, "policy_loaded": true, "ca_usable": false, "accepting": true])

            state.setCAUsable(true)
            details.withLockedValue { $0 = ["spotify session user needs re-authorisation (invalid_grant)"] }
            answer = try await client.get("/readyz")
            #expect(answer.status == 200)
            json = try answer.json()
            #expect(json["status"] as? String == "ready")
            #expect(json["missing"] as? [String] == [])
            #expect(json["details"] as? [String] == ["spotify session user needs re-authorisation (invalid_grant)"])
        }
    }

    @Test func policiesHasTheDesignShapeAndValues() async throws {
        let fixture = try AdminFixture(policies: Self.policies)
        let store = try fixture.store()
        let probeAt = DateText.parse("2026-11-22T11:50:00Z", bound: .start)!
        let leafNotAfter = DateText.parse("2027-02-10T23:59:59Z", bound: .start)!
        let providers = AdminServer.Providers(readiness: Self.ready.readiness, probe: { pattern in
            pattern == "api.example.com"
                ? ProbeStatus(success: true, at: probeAt, leafNotAfter: leafNotAfter, verdict: "match") : nil
        })
        try await withAdminServer(store: store, providers: providers) { client in
            let answer = try await client.get("/policies")
            #expect(answer.status == 200)
            #expect(answer.headers["content-type"] == "application/json")
            let json = try answer.json()
            #expect(Set(json.keys) == ["hosts", "last_reload", "observed"])
            let lastReload = try #require(json["last_reload"] as? [String: Any])
            #expect(Set(lastReload.keys) == ["at", "result", "errors"])
            #expect(lastReload["at"] is NSNull)
            #expect(lastReload["result"] is NSNull)
            #expect((lastReload["errors"] as? [Any])?.isEmpty == true)

            let hosts = try #require(json["hosts"] as? [[String: Any]])
            #expect(hosts.map { $0["match"] as? String } == ["api.example.com", "**.cdn.example.com"])
            for host in hosts {
                #expect(Set(host.keys) == [
                    "match", "action", "file", "digest", "upstream", "upgrade_to_tls", "tls", "enforcement", "pins", "timeline_warning", "probe",
                ])
            }
            let api = hosts[0]
            #expect(api["action"] as? String == "intercept")
            #expect(api["file"] as? String == store.snapshot.policies[0].file)
            #expect((api["file"] as? String)?.hasSuffix("/policies/p.yaml") == true)
            #expect(api["digest"] as? String == store.snapshot.policies[0].digest)
            #expect((api["digest"] as? String)?.count == 64)
            let pins = try #require(api["pins"] as? [[String: Any]])
            #expect(pins.count == 3)
            for pin in pins {
                #expect(Set(pin.keys) == ["kind", "pin", "not_before", "not_after", "active", "note"])
            }
            #expect(pins.map { $0["kind"] as? String } == ["spki_sha256", "spki_sha256", "cert_sha256"])
            #expect(pins.map { $0["pin"] as? String } == [AdminFixture.pin(1), AdminFixture.pin(2), AdminFixture.pin(3)])
            #expect(pins.map { $0["active"] as? Bool } == [false, true, false])
            #expect(pins[0]["not_before"] is NSNull)
            #expect(pins[0]["not_after"] as? String == "2026-01-01T23:59:59Z")
            #expect(pins[1]["not_after"] as? String == "2027-03-01T23:59:59Z")
            #expect(pins[2]["not_before"] as? String == "2027-01-01T08:30:00Z")
            #expect(pins[2]["not_after"] is NSNull)
            // One active pin: no backup as of now.
            #expect(api["timeline_warning"] as? String == "no backup pin as of 2026-11-22T12:00:00Z: fewer than two active pins")
            let probe = try #require(api["probe"] as? [String: Any])
            #expect(probe["success"] as? Bool == true)
            #expect(probe["at"] as? String == "2026-11-22T11:50:00Z")
            #expect(probe["leaf_not_after"] as? String == "2027-02-10T23:59:59Z")
            #expect(probe["verdict"] as? String == "match")
            #expect(probe["error"] is NSNull)

            let cdn = hosts[1]
            #expect(cdn["action"] as? String == "tunnel")
            #expect((cdn["pins"] as? [Any])?.isEmpty == true)
            #expect(cdn["timeline_warning"] is NSNull)
            let noProbe = try #require(cdn["probe"] as? [String: Any])
            #expect(Set(noProbe.keys) == ["success", "at", "leaf_not_after", "verdict", "error", "detail"])
            #expect(noProbe.values.allSatisfy { $0 is NSNull })
        }
    }

    /// A policy's `auth`: the credential's name and how it is attached, every
    /// setting of it, and never the credential's value.
    @Test func aPolicysAuthIsDescribedByNameAndSettings() async throws {
        let fixture = try AdminFixture(policies: """
            hosts:
              - match: api.example.com
                pins: {spki_sha256: [{pin: "\(AdminFixture.pin(1))"}, {pin: "\(AdminFixture.pin(2))"}]}
                auth: {credential: github, header: X-Api-Key, format: "{token}", throttle_queue: 5}
            """, main: "credentials:\n  github: {kind: static, value: s3cret-value-7}\n")
        let store = try fixture.store()
        try await withAdminServer(store: store, providers: Self.ready) { client in
            let answer = try await client.get("/policies")
            #expect(answer.status == 200)
            let hosts = try #require(try answer.json()["hosts"] as? [[String: Any]])
            let auth = try #require(hosts.first?["auth"] as? [String: Any], "\(hosts)")
            #expect(Set(auth.keys) == ["credential", "header", "format", "replace_client_auth", "attach_unpinned", "throttle_queue"])
            #expect(auth["credential"] as? String == "github")
            #expect(auth["header"] as? String == "X-Api-Key")
            #expect(auth["format"] as? String == "{token}")
            #expect(auth["replace_client_auth"] as? Bool == true)
            #expect(auth["attach_unpinned"] as? Bool == false)
            #expect(auth["throttle_queue"] as? Int == 5)
            #expect(!answer.body.contains("s3cret-value-7"))
        }
    }

    @Test func reloadSucceedsThenFailsWhileTheOldSnapshotServes() async throws {
        let fixture = try AdminFixture(policies: Self.policies)
        let store = try fixture.store()
        let metrics = PinproxyMetrics()
        try await withAdminServer(store: store, metrics: metrics, providers: Self.ready) { client in
            try fixture.write(policies: Self.policies + "\n  - {match: new.example.com, action: deny}\n")
            var answer = try await client.post("/reload")
            #expect(answer.status == 200)
            var json = try answer.json()
            #expect(json["result"] as? String == "success")
            #expect(json["hosts"] as? Int == 3)
            #expect(json["at"] as? String == "2026-11-22T12:00:00Z")
            #expect(try await hostNames(client) == ["api.example.com", "**.cdn.example.com", "new.example.com"])

            try fixture.write(policies: """
                hosts:
                  - {match: api.example.com, action: intercept}
                  - {match: broken.example.com, action: sideways}
                """)
            answer = try await client.post("/reload")
            #expect(answer.status == 422)
            json = try answer.json()
            #expect(json["result"] as? String == "failure")
            let errors = try #require(json["errors"] as? [[String: Any]])
            #expect(errors.count == 1)
            #expect(errors.first?["file"] as? String == fixture.policyFile)
            #expect(errors.first?["line"] as? Int == 3)
            #expect(errors.first?["column"] as? Int == 41)
            #expect((errors.first?["message"] as? String)?.contains("`sideways`") == true)

            // The previous snapshot still serves, and /policies says why the new one did not.
            let policies = try await client.get("/policies").json()
            #expect((policies["hosts"] as? [[String: Any]])?.compactMap { $0["match"] as? String }
                == ["api.example.com", "**.cdn.example.com", "new.example.com"])
            let lastReload = try #require(policies["last_reload"] as? [String: Any])
            #expect(lastReload["result"] as? String == "failure")
            #expect(lastReload["at"] as? String == "2026-11-22T12:00:00Z")
            let lastErrors = try #require(lastReload["errors"] as? [[String: Any]])
            #expect(lastErrors.first?["line"] as? Int == 3)
            #expect(lastErrors.first?["column"] as? Int == 41)
            #expect(store.snapshot.policy(forHost: "new.example.com") != nil)

            let text = try PrometheusText(parsing: try await client.get("/metrics").body)
            #expect(text.value("pinproxy_policy_reloads_total", ["result": "success"]) == 1)
            #expect(text.value("pinproxy_policy_reloads_total", ["result": "failure"]) == 1)
        }
    }

    @Test func otherMethodsGet405() async throws {
        let fixture = try AdminFixture(policies: Self.policies)
        try await withAdminServer(store: try fixture.store(), providers: Self.ready) { client in
            let get = try await client.get("/reload")
            #expect(get.status == 405)
            #expect(get.headers["allow"] == "POST")
            #expect(try get.json()["error"] as? String == "method_not_allowed")
            for (method, path) in [("PUT", "/reload"), ("DELETE", "/reload"), ("POST", "/metrics"), ("POST", "/policies"),
                                   ("PUT", "/healthz"), ("POST", "/readyz")] {
                let answer = try await client.request(method, path)
                #expect(answer.status == 405, "\(method) \(path)")
            }
            #expect(try await client.get("/nowhere").status == 404)
        }
    }

    private func hostNames(_ client: AdminClient) async throws -> [String] {
        let json = try await client.get("/policies").json()
        return (json["hosts"] as? [[String: Any]] ?? []).compactMap { $0["match"] as? String }
    }
}
