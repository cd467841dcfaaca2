import COpenSSL
import NIOConcurrencyHelpers

/// One loaded set of trusted roots (an `X509_STORE`). Loading the system
/// store parses every root the distribution ships: tens of milliseconds and
/// most of a megabyte each time. Contexts that trust the same roots take a
/// reference to one store instead (OpenSSL's stores are reference counted
/// and safe to share between contexts and threads).
final class TrustStore: @unchecked Sendable {
    let ref: OpaquePointer

    private init(_ ref: OpaquePointer) {
        self.ref = ref
    }

    deinit {
        X509_STORE_free(ref)
    }

    /// The store for `roots` given as the system's or a file; certificates
    /// given directly go into a context's own store instead.
    static func load(_ roots: TLSConfiguration.TrustRoots) throws -> TrustStore {
        switch roots {
        case .system: return try system()
        case .file(let path): return try file(path)
        case .certificates: preconditionFailure("certificates given directly are not a shared trust store")
        }
    }

    /// OpenSSL's default verify paths: the distribution's bundle and hash directory.
    static func system() throws -> TrustStore {
        let store = try empty()
        guard X509_STORE_set_default_paths(store.ref) == 1 else {
            throw TLSError.configuration(OpenSSLErrorQueue.drainReason(or: "cannot load the system trust store"))
        }
        return store
    }

    /// A PEM file of trusted certificates, in place of the system's.
    static func file(_ path: String) throws -> TrustStore {
        // Parse first: a file without certificates is an error, not an empty store.
        _ = try Certificate.loadPEM(file: path)
        let store = try empty()
        guard X509_STORE_load_file(store.ref, path) == 1 else {
            throw TLSError.configuration("trust store \(path): \(OpenSSLErrorQueue.drainReason(or: "cannot load"))")
        }
        return store
    }

    private static func empty() throws -> TrustStore {
        OpenSSLErrorQueue.clear()
        guard let ref = X509_STORE_new() else {
            throw TLSError.configuration(OpenSSLErrorQueue.drainReason(or: "X509_STORE_new failed"))
        }
        return TrustStore(ref)
    }
}

/// The trust stores of one policy load: each distinct set of roots (the
/// system's, or one `ca_file` path) is read once and shared by every context
/// built with this cache. Make a new cache for each load, so a reload reads
/// an edited CA file (or an updated system bundle) again.
public final class TrustStoreCache: Sendable {
    private let stores = NIOLockedValueBox<[TLSConfiguration.TrustRoots: TrustStore]>([:])

    public init() {}

    /// How many stores were loaded (not reused) through this cache.
    public var loadedCount: Int { stores.withLockedValue { $0.count } }

    /// The shared store for `roots`; nil for roots given as certificates,
    /// which belong to one context alone. A store that fails to load is not
    /// kept: each context that names it reports the error.
    func store(for roots: TLSConfiguration.TrustRoots) throws -> TrustStore? {
        switch roots {
        case .certificates:
            return nil
        case .system, .file:
            // Held across the load so two threads never load the same roots twice.
            return try stores.withLockedValue { stores in
                if let store = stores[roots] { return store }
                let store = try TrustStore.load(roots)
                stores[roots] = store
                return store
            }
        }
    }
}
