import Foundation
import PinproxyTestSupport
import Testing

/// Request smuggling from an HTTP/2 app onto an HTTP/1.1 upstream
/// (docs/contract.md §11): a GET, HEAD, DELETE or TRACE stream that carries
/// DATA but no `content-length` must reach the upstream as exactly one
/// request, its body framed, and the bearer token pinproxy attaches must
/// never come back to the app. The app is Python's `h2` on a real TLS
/// session through CONNECT; the upstream is a Python `ssl` server that
/// prints every request it parses.
@Suite("HTTP/2 request smuggling", .blockingWaits, .serialized)
struct HTTP2SmugglingTests {
    final class Stack: @unchecked Sendable {
        let dir: TemporaryDirectory
        let pki: TestPKI
        let accounts: MockAccounts
        let upstream: ScriptedUpstream
        let proxy: ProxyHarness

        init() async throws {
            dir = try TemporaryDirectory("pinproxy-h2-smuggling")
            pki = try TestPKI.make(in: dir, names: ["accounts.spotify.test", "api.smuggle.test"])
            accounts = try await MockAccounts(chainFile: pki.chainFile, keyFile: pki.leafKey)
            upstream = try ScriptedUpstream(directory: dir, tls: (pki.chainFile, pki.leafKey))
            try dir.write("secret.txt", accounts.clientSecret + "\n")
            // Pinned, so that the token is attached (attach_unpinned is false).
            let pins = Scenario.pins(try TestPKI.opensslSPKIPin(pki.intermediateCertificate), Scenario.backupPin)
            proxy = try ProxyHarness(policies: Scenario.policies([
                .intercept("accounts.spotify.test", upstream: .port(accounts.port), pins),
                .intercept("api.smuggle.test", upstream: .port(upstream.port), pins, "auth: { spotify: app }"),
            ], caFile: pki.rootCertificate), mainConfig: """
                network:
                  allow: [127.0.0.0/8]
                spotify:
                  accounts: https://accounts.spotify.test
                  sessions:
                    app:
                      flow: client_credentials
                      client_id: \(accounts.clientID)
                      client_secret_file: ../secret.txt
                """, directory: dir)
        }

        /// Runs the h2 app: each stream in turn, on one connection; returns
        /// what the app received, one JSON object a stream.
        func app(_ streams: [[String: Any]]) throws -> [[String: Any]] {
            let script = try dir.write("h2app.py", Self.appScript)
            let plan = String(decoding: try JSONSerialization.data(withJSONObject: streams), as: UTF8.self)
            let result = try ChildProcess.run("python3", [script, String(proxy.port), proxy.caFile, "api.smuggle.test", plan])
            return result.output.split(separator: "\n").compactMap { line in
                try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            }
        }

        static let appScript = #"""
            import json, socket, ssl, sys
            import h2.config, h2.connection, h2.events
            port, ca, host, plan = int(sys.argv[1]), sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
            sock = socket.create_connection(("127.0.0.1", port), timeout=15)
            sock.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host, host)).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                head += sock.recv(1)
            assert b" 200 " in head.split(b"\r\n")[0], head
            ctx = ssl.create_default_context(cafile=ca)
            ctx.set_alpn_protocols(["h2"])
            tls = ctx.wrap_socket(sock, server_hostname=host)
            assert tls.selected_alpn_protocol() == "h2"
            conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
            conn.initiate_connection()
            tls.sendall(conn.data_to_send())
            for item in plan:
                sid = conn.get_next_available_stream_id()
                headers = [(":method", item["method"]), (":path", item["path"]), (":scheme", "https"), (":authority", host)]
                body = item.get("body", "").encode("latin-1")
                conn.send_headers(sid, headers, end_stream=not body)
                if body:
                    conn.send_data(sid, body, end_stream=True)
                tls.sendall(conn.data_to_send())
                answer = {"path": item["path"], "headers": [], "body": "", "reset": False}
                done = False
                while not done:
                    data = tls.recv(65536)
                    if not data:
                        answer["closed"] = True
                        break
                    for event in conn.receive_data(data):
                        if isinstance(event, h2.events.ResponseReceived) and event.stream_id == sid:
                            answer["headers"] = [[k, v] for k, v in event.headers]
                        elif isinstance(event, h2.events.DataReceived) and event.stream_id == sid:
                            answer["body"] += event.data.decode("latin-1")
                            conn.acknowledge_received_data(event.flow_controlled_length, sid)
                        elif isinstance(event, h2.events.StreamEnded) and event.stream_id == sid:
                            done = True
                        elif isinstance(event, h2.events.StreamReset) and event.stream_id == sid:
                            answer["reset"] = True
                            done = True
                    tls.sendall(conn.data_to_send())
                print(json.dumps(answer), flush=True)
            """#
    }

    static let stack = Task.blockingSetup { try await Stack() }

    /// What the app received for one stream, headers and body as one text.
    static func text(_ answer: [String: Any]) -> String {
        let headers = (answer["headers"] as? [[String]] ?? []).map { $0.joined(separator: ": ") }.joined(separator: "\n")
        return headers + "\n\n" + (answer["body"] as? String ?? "")
    }

    static func status(_ answer: [String: Any]) -> String? {
        (answer["headers"] as? [[String]])?.first { $0.first == ":status" }?.last
    }

    @Test(arguments: ["GET", "HEAD", "DELETE", "TRACE"])
    func aBodyWithoutLengthIsOneFramedRequestAndTheTokenNeverReturns(method: String) async throws {
        let s = try await Self.stack.value
        let tag = "\(method.lowercased())-\(UUID().uuidString.prefix(8))"
        // The body is a request of its own whose declared length swallows
        // whatever follows it on the upstream connection: the next request,
        // bearer token and all, would come back to the app as its "echo".
        let smuggled = "POST /echo-\(tag) HTTP/1.1\r\nHost: api.smuggle.test\r\nContent-Length: 400\r\n\r\n"
        let answers = try s.app([
            ["method": method, "path": "/first-\(tag)", "body": smuggled],
            ["method": "GET", "path": "/second-\(tag)"],
        ])
        #expect(answers.count == 2, "\(answers)")
        // The upstream parsed exactly the two requests the app made, the first
        // with the smuggled bytes as its (chunked) body, and nothing else.
        let seen = s.upstream.requests.filter { $0.contains(tag) }
        #expect(seen == ["\(method) /first-\(tag) \(smuggled.utf8.count) chunked", "GET /second-\(tag) 0"], "\(seen)")
        #expect(s.upstream.count("POST /echo-\(tag)") == 0)
        // A token was attached to both requests, and the app saw it nowhere.
        let token = try #require(s.accounts.counters.lastIssuedAccessToken)
        for answer in answers {
            #expect(!Self.text(answer).contains(token), "the app received its bearer token: \(answer)")
            #expect(Self.status(answer) == "200", "\(answer)")
        }
    }

    @Test func anEmptyDataFrameAfterAGetSendsNoBody() async throws {
        let s = try await Self.stack.value
        let tag = "empty-\(UUID().uuidString.prefix(8))"
        // h2 sends HEADERS without END_STREAM, then an empty DATA frame with it.
        let script = try s.dir.write("h2empty.py", """
            import socket, ssl, sys
            import h2.config, h2.connection, h2.events
            port, ca, host, path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
            sock = socket.create_connection(("127.0.0.1", port), timeout=15)
            sock.sendall(("CONNECT %s:443 HTTP/1.1\\r\\nHost: %s:443\\r\\n\\r\\n" % (host, host)).encode())
            head = b""
            while b"\\r\\n\\r\\n" not in head:
                head += sock.recv(1)
            ctx = ssl.create_default_context(cafile=ca)
            ctx.set_alpn_protocols(["h2"])
            tls = ctx.wrap_socket(sock, server_hostname=host)
            conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
            conn.initiate_connection()
            conn.send_headers(1, [(":method", "GET"), (":path", path), (":scheme", "https"), (":authority", host)])
            conn.send_data(1, b"", end_stream=True)
            tls.sendall(conn.data_to_send())
            while True:
                data = tls.recv(65536)
                if not data:
                    break
                events = conn.receive_data(data)
                for event in events:
                    if isinstance(event, h2.events.ResponseReceived):
                        print("status", dict(event.headers)[":status"], flush=True)
                if any(isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)) for e in events):
                    break
                tls.sendall(conn.data_to_send())
            """)
        let result = try ChildProcess.run("python3", [script, String(s.proxy.port), s.proxy.caFile, "api.smuggle.test", "/\(tag)"])
        #expect(result.output.contains("status 200"), "\(result.output)")
        // No body, so no framing header and no chunk: the upstream read a plain GET.
        #expect(s.upstream.requests.filter { $0.contains(tag) } == ["GET /\(tag) 0"])
    }
}
