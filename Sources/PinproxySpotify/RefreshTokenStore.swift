import Foundation
import NIOConcurrencyHelpers
import PinproxyPolicy

/// A session's stored refresh token (docs/contract.md §7, §10): the raw value and a
/// newline in a file of mode 0600. The file is the source of truth, so a
/// `pinproxy spotify login` that rewrites it is picked up at the next refresh;
/// a value the store could not write is kept in memory rather than lost.
final class RefreshTokenStore: Sendable {
    let path: String
    private let memory = NIOLockedValueBox<Memory>(Memory())

    private struct Memory {
        var value: Secret?
        /// The file as it was when `value` was read from or written to it.
        var signature: FileSignature?
    }

    enum LoadError: Error, Equatable {
        case missing
        case empty
        case unreadable(String)
    }

    struct Loaded {
        var token: Secret
        /// Set when the file was (re)read rather than answered from memory: its mtime.
        var readFromFileModifiedAt: Date?
    }

    init(path: String) {
        self.path = path
    }

    /// The current refresh token: from memory while the file is unchanged, else re-read.
    func load() -> Result<Loaded, LoadError> {
        let current = FileSignature(path: path)
        return memory.withLockedValue { memory in
            if let value = memory.value, current == memory.signature {
                return .success(Loaded(token: value, readFromFileModifiedAt: nil))
            }
            guard let current else {
                // The file vanished; a token we failed to write is still better than none.
                if let value = memory.value, memory.signature == nil { return .success(Loaded(token: value, readFromFileModifiedAt: nil)) }
                return .failure(.missing)
            }
            switch SecretFile.read(path) {
            case .failure(let error):
                return .failure(error)
            case .success(let text):
                memory = Memory(value: Secret(text), signature: current)
                return .success(Loaded(token: Secret(text), readFromFileModifiedAt: current.modified))
            }
        }
    }

    /// The file's mtime, if it exists (the initial `refreshTokenIssued`).
    func modificationDate() -> Date? {
        FileSignature(path: path)?.modified
    }

    /// Replaces the stored token: temp file in the same directory, mode 0600,
    /// fsync, rename, fsync of the directory. The new value is kept in memory
    /// even when the write fails (the old one may already be revoked).
    func replace(with token: Secret) throws {
        do {
            try AtomicFile.write(Array((token.reveal() + "\n").utf8), to: path, mode: 0o600)
            let signature = FileSignature(path: path)
            memory.withLockedValue { $0 = Memory(value: token, signature: signature) }
        } catch {
            memory.withLockedValue { memory in
                memory.value = token
                // Unchanged file → `load` answers from memory; a later outside write still wins.
                memory.signature = FileSignature(path: path)
            }
            throw error
        }
    }
}

/// Identity and version of a file, to notice an outside rewrite cheaply.
struct FileSignature: Equatable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modifiedSeconds: Int
    var modifiedNanoseconds: Int

    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modifiedSeconds = Int(info.st_mtim.tv_sec)
        modifiedNanoseconds = Int(info.st_mtim.tv_nsec)
    }

    var modified: Date {
        Date(timeIntervalSince1970: TimeInterval(modifiedSeconds) + TimeInterval(modifiedNanoseconds) / 1e9)
    }
}

/// A secret or refresh-token file: the raw value, trailing whitespace ignored (docs/contract.md §10).
enum SecretFile {
    static func read(_ path: String) -> Result<String, RefreshTokenStore.LoadError> {
        guard let data = FileManager.default.contents(atPath: path) else {
            return .failure(FileManager.default.fileExists(atPath: path) ? .unreadable("cannot read \(path)") : .missing)
        }
        guard let text = String(data: data, encoding: .utf8) else {
            return .failure(.unreadable("\(path) is not UTF-8"))
        }
        var end = text.endIndex
        while end > text.startIndex, text[text.index(before: end)].isWhitespace { end = text.index(before: end) }
        let value = String(text[..<end])
        return value.isEmpty ? .failure(.empty) : .success(value)
    }
}

enum AtomicFile {
    struct WriteError: Error, CustomStringConvertible {
        var description: String
    }

    static func write(_ bytes: [UInt8], to path: String, mode: mode_t) throws {
        let directory = (path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent
        let base = (path as NSString).lastPathComponent
        var template = Array("\(directory)/.\(base).tmp-XXXXXX".utf8CString)
        let fd = mkstemp(&template)
        guard fd >= 0 else { throw WriteError(description: "cannot create a temp file next to \(path): \(String(cString: strerror(errno)))") }
        let temp = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var failure: String?
        if fchmod(fd, mode) != 0 { failure = "chmod: \(String(cString: strerror(errno)))" }
        if failure == nil {
            failure = bytes.withUnsafeBytes { buffer -> String? in
                var offset = 0
                while offset < buffer.count {
                    let n = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                    if n < 0, errno == EINTR { continue }
                    if n <= 0 { return "write: \(String(cString: strerror(errno)))" }
                    offset += n
                }
                return nil
            }
        }
        if failure == nil, fsync(fd) != 0 { failure = "fsync: \(String(cString: strerror(errno)))" }
        close(fd)
        if failure == nil, rename(temp, path) != 0 { failure = "rename: \(String(cString: strerror(errno)))" }
        if let failure {
            unlink(temp)
            throw WriteError(description: "cannot write \(path): \(failure)")
        }
        // The rename itself is durable only once the directory is synced.
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            _ = fsync(dirFD)
            close(dirFD)
        }
    }
}
