import Foundation

/// The `pinproxy` executable built beside the test bundle (the end-to-end
/// target depends on it, so `swift test` builds it first).
public enum PinproxyBinary {
    public static var path: String {
        if let override = ProcessInfo.processInfo.environment["PINPROXY_BINARY"] { return override }
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        // The runner may be inside a bundle directory; walk up to the build products.
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("pinproxy").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("pinproxy").path
    }

    /// Runs `pinproxy ARGS` to completion: (status, stdout, stderr).
    public static func run(_ arguments: [String], currentDirectory: String? = nil,
                           environment: [String: String]? = nil) throws -> (status: Int32, stdout: String, stderr: String) {
        try ChildProcess.runSeparately(path, arguments, environment: environment, currentDirectory: currentDirectory)
    }
}
