import Foundation
@testable import PinproxyPolicy
import Testing

/// Reading configuration files, as the watcher does every second.
struct FileBytesTests {
    /// An empty policy file is read every second for as long as it stays
    /// empty; each read must give its memory back. (Through Foundation each
    /// read of an empty file kept a 4 KiB buffer.)
    @Test func readingAnEmptyFileAgainAndAgainKeepsNoMemory() throws {
        let tree = try ConfigTree()
        try tree.write("policies/empty.yaml", "")
        try tree.write("policies/one.yaml", "#")
        let empty = tree.root + "/policies/empty.yaml"
        #expect(FileBytes.read(empty) == Data())
        #expect(WatchedFile.read(empty)?.size == 0)
        // The same reads of a one-byte file are the yardstick: whatever an
        // allocator (or a sanitizer's quarantine) holds on to, it holds for both.
        let control = try Self.growth { for _ in 0..<5_000 { _ = WatchedFile.read(tree.root + "/policies/one.yaml") } }
        let grown = try Self.growth { for _ in 0..<5_000 { _ = WatchedFile.read(empty) } }
        // 5,000 kept buffers of 4 KiB each touch at least 20 MB.
        #expect(grown < control + 5_000_000,
                "5,000 reads of an empty file grew the process by \(grown) bytes (of a one-byte file: \(control))")
    }

    static func growth(_ body: () -> Void) throws -> Int {
        let before = try residentBytes()
        body()
        return try residentBytes() - before
    }

    /// This process's resident memory, from /proc.
    static func residentBytes() throws -> Int {
        let statm = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8)
        let pages = Int(statm.split(separator: " ")[1]) ?? 0
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    @Test func aFileWithContentIsReadWholeAndAMissingOneIsNil() throws {
        let tree = try ConfigTree()
        try tree.write("pinproxy.yaml", "listen: 127.0.0.1:0\n")
        #expect(FileBytes.read(tree.root + "/pinproxy.yaml") == Data("listen: 127.0.0.1:0\n".utf8))
        #expect(FileBytes.read(tree.root + "/missing.yaml") == nil)
        #expect(WatchedFile.read(tree.root + "/missing.yaml") == nil)
    }
}
