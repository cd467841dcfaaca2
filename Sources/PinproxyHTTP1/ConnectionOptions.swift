/// What a head says about its connection, from its `Connection` fields and
/// whether it has an `Upgrade` field, read in one pass over its fields.
public struct ConnectionOptions: Equatable, Sendable {
    /// Whether the connection carries another message after this one
    /// (RFC 9112 §9.3): HTTP/1.1 unless `Connection: close`, HTTP/1.0 only
    /// with `Connection: keep-alive`. NIO's decoder refuses bytes after a
    /// message that ends its connection, so a reader of heads stops there.
    public var persists: Bool
    /// Whether a request asks to upgrade the connection (`Connection:
    /// upgrade` and an `Upgrade` field): after this message, whatever its
    /// body, the connection leaves HTTP/1 for NIO's decoder, which reads
    /// nothing after it.
    public var asksUpgrade: Bool
}

extension ParsedHead {
    public func connectionOptions(in bytes: UnsafeRawBufferPointer) -> ConnectionOptions {
        var close = false
        var keepAlive = false
        var connectionUpgrade = false
        var upgradeField = false
        for field in fields {
            if field.name.count == 7 && FieldNames.equal(bytes, field.name, "upgrade") { upgradeField = true }
            guard field.name.count == 10 && FieldNames.equal(bytes, field.name, "connection") else { continue }
            FieldNames.forEachToken(bytes, field.value) { token in
                if FieldNames.equal(bytes, token, "close") { close = true }
                if FieldNames.equal(bytes, token, "keep-alive") { keepAlive = true }
                if FieldNames.equal(bytes, token, "upgrade") { connectionUpgrade = true }
            }
        }
        return ConnectionOptions(persists: !close && (minorVersion >= 1 || keepAlive),
                                 asksUpgrade: connectionUpgrade && upgradeField)
    }
}
