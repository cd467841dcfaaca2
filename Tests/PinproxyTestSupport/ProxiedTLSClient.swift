import Foundation

/// An app in Python (socket + ssl, not pinproxy's code) that opens a CONNECT
/// through the proxy, speaks TLS trusting pinproxy's CA, sends requests on
/// that one connection and reports at the byte level what came back: the
/// head, how many body bytes, whether a chunked body was terminated, how the
/// connection ended, and whether it would carry another request.
public struct ProxiedTLSClient {
    public struct Exchange: Decodable, Sendable {
        /// The response head as sent (status line and fields), or "" if none came.
        public var head: String
        public var status: Int
        /// The bytes after the head, as received (chunk framing included).
        public var body: Data
        /// How the reading ended: "complete" (the framing said the message was
        /// whole), "eof" (the proxy closed), "reset", "timeout".
        public var end: String

        enum CodingKeys: String, CodingKey { case head, status, body, end }
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            head = try c.decode(String.self, forKey: .head)
            status = try c.decode(Int.self, forKey: .status)
            body = Data(base64Encoded: try c.decode(String.self, forKey: .body)) ?? Data()
            end = try c.decode(String.self, forKey: .end)
        }

        /// The declared Content-Length, if any.
        public var contentLength: Int? {
            head.split(separator: "\r\n").lazy.compactMap { line -> Int? in
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                return Int(parts[1].trimmingCharacters(in: .whitespaces))
            }.first
        }
        public var isChunked: Bool { head.lowercased().contains("transfer-encoding: chunked") }
        /// The chunked stream's last chunk and final CRLF arrived.
        public var chunkedTerminated: Bool { body.range(of: Data("0\r\n\r\n".utf8)) != nil }
    }

    public struct Result: Decodable, Sendable {
        public var connectStatus: Int
        public var exchanges: [Exchange]
        /// After the last exchange the client sent one more request on the same
        /// connection: true if any byte came back (the connection was reused).
        public var answeredAfter: Bool
    }

    /// Sends `paths` one after the other on one intercepted connection to
    /// `host`; stops at the first exchange that does not end "complete".
    public static func run(proxyPort: Int, host: String, paths: [String], caFile: String,
                           directory: TemporaryDirectory, timeout: Double = 30) throws -> Result {
        let script = try directory.write("proxied_tls_client.py", Self.script)
        let process = try ChildProcess("python3", [script, String(proxyPort), host, caFile, String(timeout)] + paths,
                                       directory: directory, name: "client-\(UUID().uuidString)")
        guard process.waitForExit(timeout: timeout * Double(paths.count + 1) + 10) != nil else {
            process.stop()
            throw TestSupportError("the Python client did not finish: \(process.outputText)")
        }
        let output = process.outputText
        guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("{") }) else {
            throw TestSupportError("no result from the Python client: \(output)")
        }
        return try JSONDecoder().decode(Result.self, from: Data(line.utf8))
    }

    static let script = #"""
    import base64, json, socket, ssl, sys

    port, host, cafile, timeout = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
    paths = sys.argv[5:]
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    raw.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host, host)).encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = raw.recv(4096)
        if not data:
            break
        buf += data
    connect_status = int(buf.split(b" ")[1]) if buf.startswith(b"HTTP/") else 0
    result = {"connectStatus": connect_status, "exchanges": [], "answeredAfter": False}
    if connect_status != 200:
        print(json.dumps(result)); sys.exit(0)
    tls = ssl.create_default_context(cafile=cafile).wrap_socket(raw, server_hostname=host)
    pending = b""

    def receive():
        try:
            data = tls.recv(65536)
        except socket.timeout:
            return None, "timeout"
        except (ConnectionResetError, BrokenPipeError):
            return None, "reset"
        except ssl.SSLError as error:
            return None, "eof" if "EOF" in str(error) else "reset"
        return (data, None) if data else (None, "eof")

    def complete(head, body):
        lower = head.lower()
        if b"transfer-encoding: chunked" in lower:
            return b"0\r\n\r\n" in body
        for line in lower.split(b"\r\n"):
            if line.startswith(b"content-length:"):
                return len(body) >= int(line.split(b":")[1])
        return False

    for path in paths:
        tls.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, host)).encode())
        buf, pending, end = pending, b"", None
        while b"\r\n\r\n" not in buf:
            data, end = receive()
            if end:
                break
            buf += data
        head, _, body = buf.partition(b"\r\n\r\n")
        while not end and not complete(head, body):
            data, end = receive()
            if not end:
                body += data
        if not end:
            end = "complete"
            # Bytes past this message's framing belong to the next one.
            lower = head.lower()
            for line in lower.split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                    body, pending = body[:length], body[length:]
        status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else 0
        result["exchanges"].append({"head": head.decode("latin-1"), "status": status,
                                    "body": base64.b64encode(body).decode(), "end": end})
        if end != "complete":
            break

    # One more request on the same connection: any answer means it was reused.
    try:
        tls.settimeout(3)
        tls.sendall(("GET /after HTTP/1.1\r\nHost: %s\r\n\r\n" % host).encode())
        data = tls.recv(65536)
        result["answeredAfter"] = bool(data)
    except (OSError, ssl.SSLError):
        pass
    print(json.dumps(result))
    """#
}
