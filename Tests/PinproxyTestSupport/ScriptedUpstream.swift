import Foundation

/// A plain-HTTP upstream in Python that misbehaves on request, path by path:
/// it is not pinproxy's code, so what it receives is what went on the wire.
/// Every request it reads is printed as `REQ METHOD PATH LENGTH` (the body
/// length it read, then ` chunked` when the body came chunked), so tests can
/// count how often a request arrived and see how it was framed.
///
/// Paths: `/close-after-request` closes without answering; `/stray` answers
/// with bytes that are no HTTP; `/switch` answers 101 unasked; `/reset-mid-body`
/// promises 1 MB, sends 10 KB and resets; `/stall-mid-body` promises 1 MB,
/// sends 64 KB and goes quiet for 20 s; `/reset-mid-chunked` sends a chunked
/// head and two chunks, then resets; `/close-after-answer` answers `200 ok`
/// (keep-alive, as far as its head says) and closes at once, so every pooled
/// connection to it is dead by the next request; `/status-099` answers with a
/// status below 100 (which NIO's decoder reads); `/echo` answers with the body
/// it read (up to `Content-Length`, or what came within a second); anything
/// else is `200 ok`. Bodies may be `Content-Length` or chunked.
/// With `tls` (a PEM chain and key) it speaks TLS, with Python's ssl module.
public final class ScriptedUpstream: @unchecked Sendable {
    public let process: ChildProcess
    public let port: Int

    public init(directory: TemporaryDirectory, tls: (chain: String, key: String)? = nil) throws {
        let script = try directory.write("scripted_upstream.py", Self.script)
        let arguments = ["-u", script] + (tls.map { [$0.chain, $0.key] } ?? [])
        process = try ChildProcess("python3", arguments, directory: directory, name: "scripted-upstream-\(UUID().uuidString)")
        port = try process.waitForOutput(timeout: 20) { text in
            text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) }
        }
    }

    deinit { process.stop() }

    /// The request lines received so far (`POST /x 0`).
    public var requests: [String] {
        process.outputText.split(separator: "\n").filter { $0.hasPrefix("REQ ") }.map { String($0.dropFirst(4)) }
    }

    public func count(_ prefix: String) -> Int {
        requests.filter { $0.hasPrefix(prefix) }.count
    }

    static let script = #"""
    import socket, ssl, struct, threading, time, sys

    context = None
    if len(sys.argv) == 3:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[1], sys.argv[2])

    def reset(conn):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()

    def read_head(conn, buf):
        while b"\r\n\r\n" not in buf:
            data = conn.recv(65536)
            if not data:
                return None, buf
            buf += data
        head, rest = buf.split(b"\r\n\r\n", 1)
        return head.decode("latin-1"), rest

    def read_chunked(conn, buf):
        body = b""
        while True:
            while b"\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return None, buf
                buf += data
            line, buf = buf.split(b"\r\n", 1)
            size = int(line.split(b";")[0], 16)
            if size == 0:
                # Trailer lines, if any, end with an empty line.
                while not buf.startswith(b"\r\n") and b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return None, buf
                    buf += data
                return body, (buf[2:] if buf.startswith(b"\r\n") else buf.split(b"\r\n\r\n", 1)[1])
            while len(buf) < size + 2:
                data = conn.recv(65536)
                if not data:
                    return None, buf
                buf += data
            body, buf = body + buf[:size], buf[size + 2:]

    def serve(conn):
        buf = b""
        conn.settimeout(30)
        try:
            if context is not None:
                conn = context.wrap_socket(conn, server_side=True)
            while True:
                head, buf = read_head(conn, buf)
                if head is None:
                    return
                lines = head.split("\r\n")
                method, path = lines[0].split(" ")[:2]
                length = 0
                chunked = False
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                    if name.strip().lower() == "transfer-encoding" and value.strip().lower() == "chunked":
                        chunked = True
                if chunked:
                    body, buf = read_chunked(conn, buf)
                    if body is None:
                        return
                    length = len(body)
                elif path.startswith("/echo"):
                    # Echoes what arrives within a second, up to Content-Length:
                    # a request smuggled ahead of another would swallow and show it.
                    conn.settimeout(1)
                    try:
                        while len(buf) < length:
                            data = conn.recv(65536)
                            if not data:
                                break
                            buf += data
                    except socket.timeout:
                        pass
                    conn.settimeout(30)
                    body, buf = buf[:length], buf[length:]
                else:
                    while len(buf) < length:
                        data = conn.recv(65536)
                        if not data:
                            return
                        buf += data
                    body, buf = buf[:length], buf[length:]
                print("REQ %s %s %d%s" % (method, path, length, " chunked" if chunked else ""), flush=True)
                if path.startswith("/echo"):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                    continue
                if path.startswith("/close-after-request"):
                    conn.close()
                    return
                if path.startswith("/stray"):
                    conn.sendall(b"\x00\x01 not http at all\r\n\r\n")
                    time.sleep(0.5)
                    conn.close()
                    return
                if path.startswith("/switch"):
                    conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: other\r\nConnection: upgrade\r\n\r\n")
                    continue
                if path.startswith("/reset-mid-body"):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 10240)
                    time.sleep(0.2)
                    reset(conn)
                    return
                if path.startswith("/reset-mid-chunked"):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"400\r\n" + b"c" * 1024 + b"\r\n" + b"400\r\n" + b"c" * 1024 + b"\r\n")
                    time.sleep(0.2)
                    reset(conn)
                    return
                if path.startswith("/close-after-answer"):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    conn.close()
                    return
                if path.startswith("/status-099"):
                    conn.sendall(b"HTTP/1.1 099 Low\r\nContent-Length: 2\r\n\r\nok")
                    continue
                if path.startswith("/stall-mid-body"):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + b"y" * 65536)
                    time.sleep(20)
                    conn.close()
                    return
                body = b"ok"
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), b"" if method == "HEAD" else body))
        except (OSError, ssl.SSLError):
            pass
        finally:
            try:
                conn.close()
            except OSError:
                pass

    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    print("PORT %d" % server.getsockname()[1], flush=True)
    deadline = time.time() + 600  # bounded: gone after ten minutes whatever happens
    server.settimeout(1)
    while time.time() < deadline:
        try:
            conn, _ = server.accept()
        except socket.timeout:
            continue
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
    """#
}
