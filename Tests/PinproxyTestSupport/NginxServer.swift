import Foundation

/// nginx from Debian as a TLS upstream (HTTP/2 and HTTP/1.1), in a directory
/// of the test's: `server` is the body of its one `server {}` block after the
/// `listen` line, `http` what else the `http {}` block needs. Its access log
/// writes `$connection $server_protocol $request_uri $status`, one line a
/// request. nginx cannot report a port it chose, so a free one is taken first.
public final class NginxServer: @unchecked Sendable {
    public let process: ChildProcess
    public let port: Int
    public let directory: String

    public init(in dir: TemporaryDirectory, chain: String, key: String, http: String = "", server: String) throws {
        directory = dir.file("nginx")
        port = try freePort()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let conf = try dir.write("nginx/nginx.conf", """
            worker_processes 1;
            daemon off;
            # The worker reads files under the test's private temp dir (ignored when not root).
            user root;
            pid \(directory)/nginx.pid;
            error_log \(directory)/error.log;
            events { worker_connections 1024; }
            http {
              log_format p '$connection $server_protocol $request_uri $status';
              access_log \(directory)/access.log p;
              client_body_temp_path \(directory)/body;
              proxy_temp_path \(directory)/proxy;
            \(http)
              server {
                listen 127.0.0.1:\(port) ssl http2;
                ssl_certificate \(chain);
                ssl_certificate_key \(key);
            \(server)
              }
            }
            """)
        process = try ChildProcess("nginx", ["-p", directory, "-c", conf], directory: dir, name: "nginx-\(UUID().uuidString.prefix(8))")
        let pidFile = directory + "/nginx.pid"
        guard pollUntilBlocking(timeout: 10, { FileManager.default.fileExists(atPath: pidFile) }) else {
            throw TestSupportError("nginx did not start: \(process.outputText) \(TextFile.read(directory + "/error.log"))")
        }
    }

    deinit { process.stop() }

    /// The access log's lines so far.
    public var accessLog: [String] {
        TextFile.read(directory + "/access.log").split(separator: "\n").map(String.init)
    }
}
