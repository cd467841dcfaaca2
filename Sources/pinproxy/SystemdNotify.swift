#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import NIOConcurrencyHelpers

/// systemd's readiness protocol (sd_notify(3), docs/contract.md §13): one datagram
/// per state to the Unix socket named by `NOTIFY_SOCKET`, a path or, with a
/// leading `@`, a name in the abstract namespace. Without the variable (not
/// under systemd, `Type=notify` not set) every call does nothing.
struct SystemdNotify: Sendable {
    let socketPath: String?

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let path = environment["NOTIFY_SOCKET"] ?? ""
        socketPath = path.isEmpty ? nil : path
    }

    /// Sends `state` (e.g. `READY=1`); returns whether the datagram went out.
    @discardableResult
    func send(_ state: String) -> Bool {
        guard let socketPath else { return false }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(socketPath.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }  // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity, bytes.first == 0 || bytes.first == UInt8(ascii: "/") else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { path in
            for (index, byte) in bytes.enumerated() { path[index] = byte }
        }
        // Abstract names are not NUL-terminated: the length says where they end.
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes.first == 0 ? 0 : 1))
        #if canImport(Glibc)
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_DGRAM, 0)
        #endif
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer in
                message.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, 0, sockaddrPointer, length) }
            }
        }
        return sent == message.count
    }
}

/// `READY=1` once every listener named at creation has reported itself up.
final class ReadinessNotice: Sendable {
    private let pending: NIOLockedValueBox<Set<String>>
    private let notify: SystemdNotify

    init(waitingFor listeners: Set<String>, notify: SystemdNotify) {
        pending = NIOLockedValueBox(listeners)
        self.notify = notify
    }

    func listening(_ listener: String) {
        let ready = pending.withLockedValue { pending -> Bool in
            guard pending.remove(listener) != nil else { return false }
            return pending.isEmpty
        }
        if ready { notify.send("READY=1\nSTATUS=listening") }
    }
}
