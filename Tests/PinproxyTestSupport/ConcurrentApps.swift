import Foundation

/// Many apps at once through a proxy, from one Python asyncio process: each
/// sends `CONNECT host:443`, does TLS with the proxy's minted leaf (trusting
/// `caFile`), asks `GET path` and reads the whole answer. For single-flight
/// tests: how many got a 200 while the token endpoint saw one call; for the
/// pool's tests: each app's status and `X-Pinproxy-Error` (`answers`).
public enum ConcurrentApps {
    /// Runs `count` apps; each prints `ANSWER <status> <X-Pinproxy-Error or ->`,
    /// and the output's last line is `200s: N`.
    public static func run(_ count: Int, host: String, path: String, proxyPort: Int, caFile: String,
                           in dir: TemporaryDirectory) throws -> (status: Int32, output: String) {
        let script = try dir.write("concurrent-apps.py", """
            import asyncio, ssl, sys
            PORT, CA, HOST, PATH, COUNT = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
            ctx = ssl.create_default_context(cafile=CA)
            async def one(i):
                reader, writer = await asyncio.open_connection("127.0.0.1", PORT)
                writer.write(f"CONNECT {HOST}:443 HTTP/1.1\\r\\nHost: {HOST}:443\\r\\n\\r\\n".encode())
                await reader.readuntil(b"\\r\\n\\r\\n")
                await writer.start_tls(ctx, server_hostname=HOST)
                sep = "&" if "?" in PATH else "?"
                writer.write(f"GET {PATH}{sep}i={i} HTTP/1.1\\r\\nHost: {HOST}\\r\\nConnection: close\\r\\n\\r\\n".encode())
                data = await reader.read()
                head = data.split(b"\\r\\n\\r\\n", 1)[0].decode("latin-1").split("\\r\\n")
                error = next((l.split(":", 1)[1].strip() for l in head[1:] if l.lower().startswith("x-pinproxy-error:")), "-")
                print("ANSWER", head[0].split(" ")[1], error, flush=True)
                return data.split(b" ", 2)[1]
            async def main():
                codes = await asyncio.gather(*[one(i) for i in range(COUNT)])
                print("200s:", sum(1 for c in codes if c == b"200"))
            asyncio.run(main())
            """)
        return try ChildProcess.run("python3", [script, String(proxyPort), caFile, host, path, String(count)])
    }

    /// Runs `count` apps at once and returns each one's answer: its status and
    /// `X-Pinproxy-Error` (nil when there is none).
    public static func answers(_ count: Int, host: String, path: String, proxyPort: Int, caFile: String,
                               in dir: TemporaryDirectory) throws -> [(status: Int, error: String?)] {
        let (status, output) = try run(count, host: host, path: path, proxyPort: proxyPort, caFile: caFile, in: dir)
        guard status == 0 else { throw TestSupportError("the apps failed (\(status)): \(output)") }
        return output.split(separator: "\n").filter { $0.hasPrefix("ANSWER ") }.map { line in
            let fields = line.split(separator: " ")
            return (Int(fields[1]) ?? 0, fields[2] == "-" ? nil : String(fields[2]))
        }
    }
}
