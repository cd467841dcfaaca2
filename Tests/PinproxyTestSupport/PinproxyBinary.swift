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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
        if let environment { process.environment = environment }
        try process.run()
        // Read both pipes concurrently so neither fills and blocks the child.
        let errData = NIOLessBox<Data>()
        let reader = Thread { errData.value = err.fileHandleForReading.readDataToEndOfFile() }
        reader.start()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while errData.value == nil { usleep(1000) }
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData.value!, as: UTF8.self))
    }
}

final class NIOLessBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: T?
    var value: T? {
        get { lock.withLock { _value } }
        set { lock.withLock { _value = newValue } }
    }
}
