/// An opaque name for one loaded trust store, so callers can tell whether
/// two contexts share it without ever seeing the OpenSSL object.
public struct TrustStoreIdentity: Hashable, Sendable {
    let address: UInt
}
