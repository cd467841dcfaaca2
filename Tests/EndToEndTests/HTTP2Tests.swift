import Foundation
import PinproxyTestSupport
import Testing

/// HTTP/2 and gRPC through intercepted sessions (docs/contract.md §11), with real
/// peers only: curl and grpcio as apps, nginx (`http2`) and a grpcio server upstream.
@Suite("HTTP/2 and gRPC through the proxy", .blockingWaits, .serialized)
struct HTTP2Tests {
    final class Setup: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let nginx: NginxServer
        let nginxPort: Int
        let grpcServer: ChildProcess
        let proxy: ProxyHarness

        var nginxLog: [String] { nginx.accessLog }

        init() async throws {
            dir = try TemporaryDirectory("pinproxy-h2")
            pki = try TestPKI.make(in: dir, names: ["h2.test", "h1up.test", "pinned.test", "grpc.test"])
            nginx = try NginxServer(in: dir, chain: pki.chainFile, key: pki.leafKey, server: """
                    location / { return 200 "proto=$server_protocol\\n"; }
                """)
            nginxPort = nginx.port
            grpcServer = try ChildProcess("python3", [Self.grpcPeer, "serve", pki.chainFile, pki.leafKey], directory: dir, name: "grpc")
            let grpcPort = try grpcServer.waitForOutput(timeout: 20) { output in
                output.split(separator: "\n").first { $0.hasPrefix("port ") }.flatMap { Int($0.dropFirst(5)) }
            }
            let ca = pki.rootCertificate
            proxy = try ProxyHarness(policies: """
                hosts:
                  - match: h2.test
                    upstream: 127.0.0.1:\(nginxPort)
                    tls: { ca_file: \(ca) }
                    probe_interval: 0
                  - match: h1up.test
                    upstream: 127.0.0.1:\(nginxPort)
                    upstream_protocol: http1
                    tls: { ca_file: \(ca) }
                    probe_interval: 0
                  - match: pinned.test
                    upstream: 127.0.0.1:\(nginxPort)
                    tls: { ca_file: \(ca) }
                    pins: { spki_sha256: [{ pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=" }, { pin: "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB=" }] }
                    probe_interval: 0
                  - match: grpc.test
                    upstream: 127.0.0.1:\(grpcPort)
                    tls: { ca_file: \(ca) }
                    probe_interval: 0
                """, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        }

        deinit {
            grpcServer.stop()
        }

        static var grpcPeer: String {
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts/grpc_peer.py").path
        }

        /// curl through the proxy: "version status" on the first line, then headers and body.
        func curl(_ url: String, _ extra: [String] = []) throws -> (version: String, status: Int, text: String) {
            let result = try ChildProcess.run("curl", ["-s", "-i", "--cacert", proxy.caFile, "-x", proxy.proxyURL,
                                                       "-w", "\n@@%{http_version} %{http_code}"] + extra + [url])
            let parts = result.output.components(separatedBy: "\n@@")
            let tail = parts.last!.split(separator: " ")
            return (String(tail[0]), Int(tail[1]) ?? 0, parts.dropLast().joined())
        }
    }

    static let setup = Task.blockingSetup { try await Setup() }

    @Test func curlSpeaksHTTP2ToPinproxyAndPinproxySpeaksHTTP2ToNginx() async throws {
        let s = try await Self.setup.value
        let answer = try s.curl("https://h2.test/both-h2", ["--http2"])
        #expect(answer.version == "2")
        #expect(answer.status == 200)
        #expect(answer.text.contains("proto=HTTP/2.0"))
        #expect(s.nginxLog.contains { $0.contains("HTTP/2.0 /both-h2 200") })
        #expect(await pollUntil(timeout: 10) {
            s.proxy.accessLog.contains { ($0["path"] as? String) == "/both-h2" && ($0["protocol"] as? String) == "h2" }
        })
    }

    @Test func http2FalseOffersAppsOnlyHTTP1() async throws {
        let s = try await Self.setup.value
        let proxy = try ProxyHarness(policies: """
            hosts:
              - match: h2.test
                upstream: 127.0.0.1:\(s.nginxPort)
                tls: { ca_file: \(s.pki.rootCertificate) }
                probe_interval: 0
            """, mainConfig: "http2: false\nnetwork:\n  allow: [127.0.0.0/8]\n")
        let result = try ChildProcess.run("curl", ["-s", "--http2", "--cacert", proxy.caFile, "-x", proxy.proxyURL,
                                                   "-w", "==%{http_version} %{http_code}", "https://h2.test/http2-off"])
        #expect(result.output.hasSuffix("==1.1 200"), "\(result.output)")
        // The upstream leg still negotiates HTTP/2: `http2` is about the apps' side only.
        #expect(result.output.contains("proto=HTTP/2.0"))
    }

    @Test func upstreamProtocolHTTP1KeepsTheUpstreamOnHTTP1() async throws {
        let s = try await Self.setup.value
        let answer = try s.curl("https://h1up.test/h2-app-h1-upstream", ["--http2"])
        #expect(answer.version == "2")
        #expect(answer.status == 200)
        #expect(s.nginxLog.contains { $0.contains("HTTP/1.1 /h2-app-h1-upstream 200") })
    }

    @Test func http1AppOverHTTP2Upstream() async throws {
        let s = try await Self.setup.value
        let answer = try s.curl("https://h2.test/h1-app-h2-upstream", ["--http1.1"])
        #expect(answer.version == "1.1")
        #expect(answer.status == 200)
        #expect(s.nginxLog.contains { $0.contains("HTTP/2.0 /h1-app-h2-upstream 200") })
    }

    @Test func pinMismatchIsAnHTTP2Refusal() async throws {
        let s = try await Self.setup.value
        let answer = try s.curl("https://pinned.test/pinned", ["--http2"])
        #expect(answer.version == "2")
        #expect(answer.status == 502)
        #expect(answer.text.lowercased().contains("x-pinproxy-error: pin_mismatch"))
        #expect(answer.text.contains("\"error\": \"pin_mismatch\""))
        #expect(!s.nginxLog.contains { $0.contains("/pinned") })
    }

    @Test func authorityForAnotherHostIsRefusedWith421OnItsStream() async throws {
        let s = try await Self.setup.value
        let answer = try s.curl("https://h2.test/misdirected", ["--http2", "-H", "Host: elsewhere.test"])
        #expect(answer.version == "2")
        #expect(answer.status == 421)
        #expect(answer.text.lowercased().contains("x-pinproxy-error:"))
    }

    @Test func hundredConcurrentStreamsRideOnFewUpstreamConnections() async throws {
        let s = try await Self.setup.value
        let urls = (1...100).map { "url = \"https://h2.test/burst-\($0)\"\noutput = \"/dev/null\"\n" }.joined()
        let config = try s.dir.write("burst.curl", urls)
        let result = try ChildProcess.run("curl", [
            "-s", "--http2", "--parallel", "--parallel-max", "100", "-K", config,
            "--cacert", s.proxy.caFile, "-x", s.proxy.proxyURL, "-w", "%{http_version} %{http_code} %{num_connects}\n",
        ])
        // One "version status connects" triple per transfer (curl may run some together on a line).
        let words = result.output.split(whereSeparator: { $0 == "\n" || $0 == " " }).map(String.init)
        let lines = stride(from: 0, to: words.count - 2, by: 1)
            .filter { words[$0] == "2" && words[$0 + 1].count == 3 }
            .map { "\(words[$0]) \(words[$0 + 1]) \(words[$0 + 2])" }
        #expect(lines.count == 100)
        #expect(lines.allSatisfy { $0.hasPrefix("2 200") })
        // One app connection: curl multiplexed the 100 requests on it.
        #expect(lines.filter { $0.hasSuffix(" 1") }.count == 1)
        let burst = s.nginxLog.filter { $0.contains("/burst-") }
        #expect(burst.count == 100)
        let connections = Set(burst.map { $0.split(separator: " ")[0] })
        #expect(connections.count <= 2, "upstream connections used: \(connections.count)")
        #expect(burst.allSatisfy { $0.contains("HTTP/2.0") })
    }

    @Test func grpcUnaryStreamingAndErrorStatusPassIntact() async throws {
        let s = try await Self.setup.value
        var environment = ProcessInfo.processInfo.environment
        environment["https_proxy"] = s.proxy.proxyURL
        environment["no_proxy"] = ""
        environment["NO_PROXY"] = ""
        let result = try ChildProcess.run("python3", [Setup.grpcPeer, "call", "grpc.test:443", s.proxy.caFile], environment: environment)
        let json = try #require(result.output.split(separator: "\n").last { $0.hasPrefix("{") })
        let out = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(out["echo"] as? String == "echo:hi")
        #expect((out["echo_trailers"] as? [String: String])?["x-echo-te"] != nil)
        #expect(out["count"] as? [String] == ["n=1", "n=2", "n=3", "n=4", "n=5"])
        #expect(out["chat"] as? [String] == ["re:a", "re:bb", "re:ccc"])
        let fail = try #require(out["fail"] as? [String: Any])
        #expect(fail["code"] as? String == "PERMISSION_DENIED")
        #expect(fail["details"] as? String == "no access for test")
        let trailers = fail["trailers"] as? [String: String]
        #expect(trailers?["x-reason"] == "denied-by-test")
        #expect(trailers?["x-bin-bin"] == "0001ff")
        // Access lines are written when each exchange ends, a little after the app has its answer.
        #expect(await pollUntil(timeout: 10) {
            s.proxy.accessLog.contains { ($0["path"] as? String) == "/t.T/Chat" && ($0["protocol"] as? String) == "h2" }
        })
    }
}
