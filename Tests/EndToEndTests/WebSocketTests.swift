import Foundation
import PinproxyTestSupport
import Testing

/// WebSocket through pinproxy (docs/contract.md §11), with real peers on both
/// sides: Python's `websockets` as a TLS echo server upstream (pinned by its
/// leaf's SPKI), and `websocket-client` as the app, using pinproxy as its
/// HTTPS proxy (CONNECT, then pinproxy's minted certificate). The absolute-form
/// `ws://` case is a raw socket speaking RFC 6455 frames by hand.
@Suite("WebSocket through the proxy", .blockingWaits, .serialized)
struct WebSocketTests {
    static let serverScript = #"""
        import asyncio, json, ssl, sys
        from websockets.asyncio.server import serve

        async def handler(ws):
            if ws.request.path == "/headers":
                # The handshake as the server saw it: what the policy added and removed.
                await ws.send(json.dumps({k.lower(): v for k, v in ws.request.headers.raw_items()}))
                await ws.close()
                return
            async for message in ws:
                await ws.send(message)

        async def main():
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(sys.argv[1], sys.argv[2])
            # No pings of its own: a silent splice must stay silent for the idle test.
            async with serve(handler, "127.0.0.1", 0, ssl=ctx, ping_interval=None, max_size=None) as server:
                port = server.sockets[0].getsockname()[1]
                print("listening %d" % port, flush=True)
                await asyncio.Future()

        asyncio.run(main())
        """#

    static let clientScript = #"""
        import hashlib, json, os, socket, ssl, sys, time
        import websocket

        mode, proxy_port, ca, host = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
        def connect(path, **kw):
            return websocket.create_connection(
                "wss://%s%s" % (host, path), http_proxy_host="127.0.0.1", http_proxy_port=proxy_port,
                proxy_type="http", sslopt={"ca_certs": ca}, timeout=30, **kw)

        out = {}
        if mode == "echo":
            ws = connect("/echo")
            for i in range(100):          # all sent before any is read: order is the splice's
                ws.send("message %d" % i)
            out["texts"] = [ws.recv() for _ in range(100)]
            blob = os.urandom(1024 * 1024)
            ws.send_binary(blob)
            echoed = ws.recv()
            out["binary_sent"] = hashlib.sha256(blob).hexdigest()
            out["binary_echoed"] = hashlib.sha256(echoed).hexdigest() if isinstance(echoed, bytes) else "text"
            out["binary_length"] = len(echoed)
            ws.close()
        elif mode == "headers":
            ws = connect("/headers", header=["X-Debug: secret-debug", "Authorization: Basic YXBwOmFwcA=="])
            out["headers"] = json.loads(ws.recv())
            ws.close()
        elif mode == "refused":
            try:
                connect("/echo")
                out["status"] = 101
            except websocket.WebSocketBadStatusException as error:
                out["status"] = error.status_code
                out["error"] = (error.resp_headers or {}).get("x-pinproxy-error")
        elif mode == "idle":
            ws = connect("/echo")
            ws.send("before the silence")
            out["first"] = ws.recv()
            try:
                out["after"] = ws.recv()      # nothing comes: pinproxy closes the silent splice
            except websocket.WebSocketConnectionClosedException:
                out["after"] = "closed"
            except websocket.WebSocketTimeoutException:
                out["after"] = "timeout"
        elif mode == "absolute":
            # ws:// absolute-form through HTTP_PROXY; the policy's upgrade_to_tls takes it upstream over TLS.
            sock = socket.create_connection(("127.0.0.1", proxy_port), timeout=30)
            sock.sendall(("GET ws://%s/echo HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n" % (host, host)).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                head += sock.recv(1)
            out["status_line"] = head.split(b"\r\n")[0].decode()
            out["accept"] = [l.split(b":", 1)[1].strip().decode() for l in head.split(b"\r\n") if l.lower().startswith(b"sec-websocket-accept:")]
            payload = b"over ws:// absolute-form"
            mask = b"\x01\x02\x03\x04"
            sock.sendall(bytes([0x81, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))
            frame = b""
            while len(frame) < 2 or len(frame) < 2 + (frame[1] & 0x7f):
                frame += sock.recv(4096)
            out["echo"] = frame[2:2 + (frame[1] & 0x7f)].decode()
            sock.close()
        print(json.dumps(out))
        """#

    final class Setup: @unchecked Sendable {
        let dir: TemporaryDirectory
        let server: ChildProcess
        let proxy: ProxyHarness
        let client: String
        let accounts: MockAccounts

        init() async throws {
            dir = try TemporaryDirectory("pinproxy-websocket")
            let pki = try TestPKI.make(in: dir, names: ["ws.test", "denied.ws.test", "wrong.ws.test", "accounts.spotify.test"])
            accounts = try await MockAccounts(chainFile: pki.chainFile, keyFile: pki.leafKey)
            try dir.write("secret.txt", accounts.clientSecret + "\n")
            let serverScript = try dir.write("ws_server.py", WebSocketTests.serverScript)
            client = try dir.write("ws_client.py", WebSocketTests.clientScript)
            server = try ChildProcess("python3", [serverScript, pki.chainFile, pki.leafKey], directory: dir, name: "ws-server")
            let port = try server.waitForOutput(timeout: 20) { text in
                text.split(separator: "\n").first { $0.hasPrefix("listening ") }.flatMap { Int($0.dropFirst(10)) }
            }
            let leaf = try TestPKI.opensslSPKIPin(pki.leafCertificate)
            func policy(_ name: String, pin: String, extra: String = "") -> String {
                """
                  - match: \(name)
                    action: intercept
                    upstream: 127.0.0.1:\(port)
                    upgrade_to_tls: true
                    tls:
                      ca_file: \(pki.rootCertificate)
                    pins:
                      spki_sha256:
                        - pin: "\(pin)"
                        - pin: "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="
                    headers:
                      set: { X-Policy: ws-rule }
                      remove: [X-Debug]
                \(extra)
                """
            }
            let policies = "hosts:\n" + [
                policy("ws.test", pin: leaf, extra: "    auth: { spotify: app }\n"),
                policy("denied.ws.test", pin: leaf, extra: "    websocket: deny\n"),
                policy("wrong.ws.test", pin: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
                """
                  - match: accounts.spotify.test
                    action: intercept
                    upstream: 127.0.0.1:\(accounts.port)
                    tls: { ca_file: \(pki.rootCertificate) }
                    probe_interval: 0
                    pins: { spki_sha256: [{pin: "\(leaf)"}, {pin: "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="}] }
                """,
            ].joined(separator: "\n")
            proxy = try ProxyHarness(policies: policies, mainConfig: """
                network:
                  allow: [127.0.0.0/8]
                limits:
                  idle_timeout: 2s
                log:
                  format: json
                spotify:
                  accounts: https://accounts.spotify.test
                  sessions:
                    app:
                      flow: client_credentials
                      client_id: \(accounts.clientID)
                      client_secret_file: ../secret.txt
                """, directory: dir)
        }

        deinit {
            server.stop()
            accounts.stop()
        }

        func run(_ mode: String, host: String = "ws.test") throws -> [String: Any] {
            let (status, output) = try ChildProcess.run("python3", [client, mode, String(proxy.port), proxy.caFile, host])
            #expect(status == 0, "\(output.suffix(2000))")
            let line = output.split(separator: "\n").last.map(String.init) ?? ""
            return (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]) ?? [:]
        }

        func lines(path: String, host: String = "ws.test") -> [[String: Any]] {
            proxy.accessLog.filter { ($0["host"] as? String) == host && ($0["path"] as? String)?.hasSuffix(path) == true }
        }
    }

    static let setup = Task.blockingSetup { try await Setup() }

    @Test func orderedMessagesAndAMebibyteAreEchoedIntact() async throws {
        let s = try await Self.setup.value
        let before = s.lines(path: "/echo").count
        let out = try s.run("echo")
        #expect(out["texts"] as? [String] == (0..<100).map { "message \($0)" })
        #expect(out["binary_length"] as? Int == 1_048_576)
        #expect(out["binary_echoed"] as? String == out["binary_sent"] as? String)
        // One access line for the upgrade, status 101, written when the splice ends, with the spliced bytes.
        let lines = try #require(await pollFor(timeout: 10) { () -> [[String: Any]]? in
            let lines = s.lines(path: "/echo")
            return lines.count > before ? lines : nil
        })
        let line = try #require(lines.last)
        #expect(line["status"] as? Int == 101, "\(line)")
        #expect(line["method"] as? String == "GET")
        #expect((line["bytes_up"] as? Int ?? 0) > 1_048_576, "\(line)")
        #expect((line["bytes_down"] as? Int ?? 0) > 1_048_576, "\(line)")
        #expect(line["pin"] as? String == "match", "\(line)")
        let scrape = try Curl.run("http://127.0.0.1:\(try s.proxy.adminPort)/metrics", proxyURL: nil, caFile: nil, directory: s.dir)
        let metrics = try PrometheusText(parsing: scrape.body)
        #expect((metrics.value("pinproxy_requests_total", ["host": "ws.test", "code": "101"]) ?? 0) >= 1)
    }

    @Test func theUpgradeGoesUpUnderThePolicysHeaderRules() async throws {
        let s = try await Self.setup.value
        let result = try s.run("headers")
        let headers = try #require(result["headers"] as? [String: String], "\(s.proxy.log.suffix(3000))")
        #expect(headers["x-policy"] == "ws-rule", "\(headers)")
        #expect(headers["x-debug"] == nil, "\(headers)")
        #expect(headers["upgrade"]?.lowercased() == "websocket", "\(headers)")
        #expect(headers["connection"]?.lowercased().contains("upgrade") == true, "\(headers)")
        #expect(headers["sec-websocket-key"] != nil && headers["sec-websocket-version"] == "13", "\(headers)")
        #expect(headers["via"] == "1.1 pinproxy", "\(headers)")
        // The session's bearer token, in place of the app's own Authorization.
        let token = try #require(s.accounts.counters.lastIssuedAccessToken)
        #expect(headers["authorization"] == "Bearer \(token)", "\(headers)")
    }

    @Test func aPolicyThatDeniesWebSocketsRefusesTheUpgradeWith403() async throws {
        let s = try await Self.setup.value
        let out = try s.run("refused", host: "denied.ws.test")
        #expect(out["status"] as? Int == 403, "\(out)")
        #expect(out["error"] as? String == "upgrade_denied", "\(out)")
        let line = try #require(await pollFor(timeout: 10) { s.lines(path: "/echo", host: "denied.ws.test").last })
        #expect(line["error"] as? String == "upgrade_denied")
    }

    @Test func aWrongPinStillRefusesTheUpgradeWith502() async throws {
        let s = try await Self.setup.value
        let out = try s.run("refused", host: "wrong.ws.test")
        #expect(out["status"] as? Int == 502, "\(out)")
        #expect(out["error"] as? String == "pin_mismatch", "\(out)")
    }

    @Test func aSilentSpliceIsClosedAfterTheIdleTimeout() async throws {
        let s = try await Self.setup.value
        let out = try s.run("idle")
        #expect(out["first"] as? String == "before the silence")
        #expect(out["after"] as? String == "closed", "\(out)")
        #expect(s.proxy.log.contains("spliced connection idle; closed"))
    }

    @Test func absoluteFormWebSocketGoesUpOverTLSWithUpgradeToTLS() async throws {
        let s = try await Self.setup.value
        let out = try s.run("absolute")
        #expect((out["status_line"] as? String)?.hasPrefix("HTTP/1.1 101") == true, "\(out)")
        // RFC 6455 §1.3: the accept for the key "dGhlIHNhbXBsZSBub25jZQ==".
        #expect(out["accept"] as? [String] == ["s3pPLMBiTxaQ9kYGzzhZRbK+xOo="], "\(out)")
        #expect(out["echo"] as? String == "over ws:// absolute-form", "\(out)")
        let line = try #require(await pollFor(timeout: 10) { s.lines(path: "/echo").first { ($0["mode"] as? String) == "forward" } })
        #expect(line["status"] as? Int == 101, "\(line)")
    }
}
