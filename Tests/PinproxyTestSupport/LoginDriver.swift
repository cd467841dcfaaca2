import Foundation

/// Drives a `… login NAME` command as a person would (`credentials login`,
/// `spotify login`): start it, read the authorize URL it prints, wait for its
/// callback listener, then let curl be the browser.
public enum LoginDriver {
    /// Starts `pinproxy ARGUMENTS --config CONFIG`; returns it and the first
    /// printed line that starts with `authorizePrefix`.
    public static func start(_ arguments: [String], config: String, in dir: TemporaryDirectory,
                             authorizePrefix: String) throws -> (ChildProcess, String) {
        let login = try ChildProcess(PinproxyBinary.path, arguments + ["--config", config],
                                     directory: dir, name: "login", currentDirectory: dir.path)
        let url = try login.waitForOutput(timeout: 20) { output in
            output.split(separator: "\n").first { $0.hasPrefix(authorizePrefix) }.map(String.init)
        }
        // The URL is printed a few milliseconds before the callback listener is up.
        _ = try login.waitForOutput(timeout: 20) { $0.contains("Waiting for the redirect") ? true : nil }
        return (login, url)
    }

    /// The browser: open `url` and follow the redirects to the callback, with
    /// `host:443` sent to the provider's loopback `port`.
    public static func browse(_ url: String, host: String, port: Int, caFile: String, in dir: TemporaryDirectory) throws -> CurlResult {
        try Curl.run(url, proxyURL: nil, caFile: caFile, extra: ["-L", "--connect-to", "\(host):443:127.0.0.1:\(port)"], directory: dir)
    }
}
