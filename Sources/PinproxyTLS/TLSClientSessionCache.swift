import COpenSSL
import NIOConcurrencyHelpers

/// Client-side TLS sessions per peer ("host:port"), so a second connection to
/// the same upstream resumes instead of doing a full handshake. OpenSSL's own
/// client cache is write-only; resumption needs `SSL_set_session`, and that
/// needs a key only the caller knows. Bounded: the oldest peer is dropped.
final class TLSClientSessionCache: @unchecked Sendable {
    private struct State {
        var sessions: [String: OpaquePointer] = [:]
        var order: [String] = []
    }

    private let capacity: Int
    private let state = NIOLockedValueBox(State())

    init(capacity: Int) {
        self.capacity = capacity
    }

    deinit {
        state.withLockedValue { state in
            for session in state.sessions.values { SSL_SESSION_free(session) }
        }
    }

    /// Takes ownership of one reference to `session`.
    func store(_ session: OpaquePointer, for key: String) {
        state.withLockedValue { state in
            if let old = state.sessions.updateValue(session, forKey: key) {
                SSL_SESSION_free(old)
                state.order.removeAll { $0 == key }
            }
            state.order.append(key)
            while state.order.count > capacity {
                let evicted = state.order.removeFirst()
                if let old = state.sessions.removeValue(forKey: evicted) { SSL_SESSION_free(old) }
            }
        }
    }

    /// Offers the stored session for `key` to `ssl` (which takes its own reference).
    func apply(to ssl: OpaquePointer, for key: String) {
        state.withLockedValue { state in
            guard let session = state.sessions[key] else { return }
            if SSL_SESSION_is_resumable(session) == 1 {
                SSL_set_session(ssl, session)
            } else {
                SSL_SESSION_free(session)
                state.sessions[key] = nil
                state.order.removeAll { $0 == key }
            }
        }
    }
}
