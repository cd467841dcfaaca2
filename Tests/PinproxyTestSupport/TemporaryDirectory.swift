import Foundation

/// A directory under the system temp dir, removed when the value is released.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String

    public init(_ prefix: String = "pinproxy-test") throws {
        var template = Array((NSTemporaryDirectory() as NSString).appendingPathComponent("\(prefix)-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw TestSupportError("mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
        TestCleanup.register(directory: path)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
        TestCleanup.unregister(directory: path)
    }

    public func file(_ name: String) -> String {
        (path as NSString).appendingPathComponent(name)
    }

    @discardableResult
    public func write(_ name: String, _ contents: String) throws -> String {
        let target = file(name)
        try FileManager.default.createDirectory(
            atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try contents.write(toFile: target, atomically: true, encoding: .utf8)
        return target
    }
}

public struct TestSupportError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
