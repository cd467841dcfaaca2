import COpenSSL
import NIOConcurrencyHelpers

/// Client-side TLS sessions per peer ("host:port"), so a second connection to
/// the same upstream resumes instead of doing a full handshake. OpenSSL's own
/// client cache is write-only; resumption needs `SSL_set_session`, and that
/// needs a key only the caller knows. Bounded: the oldest peer is dropped.
///
/// Each session is kept with the chain OpenSSL verified when it was made: a
/// resumed handshake verifies nothing and has no verified chain of its own,
/// and pins (a root pin above all) must still be checked against the chain
/// the session was verified with, not the shorter chain the server sent.
final class TLSClientSessionCache: @unchecked Sendable {
    private struct State {
        var sessions: [String: OpaquePointer] = [:]
        var chains: [String: [Certificate]] = [:]
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

    /// Takes ownership of one reference to `session`, made with `verifiedChain`.
    func store(_ session: OpaquePointer, verifiedChain: [Certificate], for key: String) {
        state.withLockedValue { state in
            if let old = state.sessions.updateValue(session, forKey: key) {
                SSL_SESSION_free(old)
                state.order.removeAll { $0 == key }
            }
            state.chains[key] = verifiedChain
            state.order.append(key)
            while state.order.count > capacity {
                let evicted = state.order.removeFirst()
                if let old = state.sessions.removeValue(forKey: evicted) { SSL_SESSION_free(old) }
                state.chains[evicted] = nil
            }
        }
    }

    /// Offers the stored session for `key` to `ssl` (which takes its own
    /// reference); returns the chain that session was verified with.
    func apply(to ssl: OpaquePointer, for key: String) -> [Certificate] {
        state.withLockedValue { state in
            guard let session = state.sessions[key] else { return [] }
            if SSL_SESSION_is_resumable(session) == 1 {
                SSL_set_session(ssl, session)
                return state.chains[key] ?? []
            }
            SSL_SESSION_free(session)
            state.sessions[key] = nil
            state.chains[key] = nil
            state.order.removeAll { $0 == key }
            return []
        }
    }
}
