import Foundation

/// Two apps through a proxy, each an intercepted session of its own
/// (Python's `http.client` over `CONNECT host:443`, trusting `caFile`),
/// asking in turn: the first app, the second, the first again, each
/// request answered before the next goes. For the pool's tests of what an
/// app's session keeps between its requests (a parked connection, a kept
/// stream room) and another app takes at `max_upstream_connections`.
public enum AppsInTurn {
    /// Each answer as `<status> <X-Pinproxy-Error or ->`, in the order asked;
    /// `paths` are the first app's, the second's, the first's again.
    public static func answers(host: String, paths: [String], proxyPort: Int, caFile: String,
                               in dir: TemporaryDirectory) throws -> (status: Int32, answers: [String], output: String) {
        precondition(paths.count == 3, "the first app, the second, the first again")
        let script = try dir.write("apps-in-turn.py", """
            import http.client, ssl, sys
            port, ca, host = int(sys.argv[1]), sys.argv[2], sys.argv[3]
            context = ssl.create_default_context(cafile=ca)
            def connection():
                c = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
                c.set_tunnel(host, 443)
                return c
            def get(c, path):
                c.request("GET", path)
                r = c.getresponse()
                r.read()
                return "ANSWER %d %s" % (r.status, r.getheader("X-Pinproxy-Error", "-"))
            first, second = connection(), connection()
            for app, path in zip((first, second, first), sys.argv[4:]):
                print(get(app, path), flush=True)
            """)
        let (status, output) = try ChildProcess.run("python3", [script, String(proxyPort), caFile, host] + paths)
        let answers = output.split(separator: "\n").filter { $0.hasPrefix("ANSWER ") }.map { String($0.dropFirst(7)) }
        return (status, answers, output)
    }
}
