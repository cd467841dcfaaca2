extension ParsedHead {
    /// Whether the connection carries another message after this one
    /// (RFC 9112 §9.3): HTTP/1.1 unless `Connection: close`, HTTP/1.0 only
    /// with `Connection: keep-alive`. NIO's decoder refuses bytes after a
    /// message that ends its connection, so a reader of heads stops there.
    public func persists(in bytes: UnsafeRawBufferPointer) -> Bool {
        var close = false
        var keepAlive = false
        for field in fields where field.name.count == 10 && FieldNames.equal(bytes, field.name, "connection") {
            FieldNames.forEachToken(bytes, field.value) { token in
                if FieldNames.equal(bytes, token, "close") { close = true }
                if FieldNames.equal(bytes, token, "keep-alive") { keepAlive = true }
            }
        }
        if close { return false }
        return minorVersion >= 1 || keepAlive
    }
}

extension ParsedHead {
    /// Whether a request asks to upgrade the connection (`Connection:
    /// upgrade` and an `Upgrade` field): after this message, whatever its
    /// body, the connection leaves HTTP/1 for NIO's decoder, which reads
    /// nothing after it.
    public func asksUpgrade(in bytes: UnsafeRawBufferPointer) -> Bool {
        var connectionUpgrade = false
        var upgrade = false
        for field in fields {
            if field.name.count == 7 && FieldNames.equal(bytes, field.name, "upgrade") { upgrade = true }
            guard field.name.count == 10 && FieldNames.equal(bytes, field.name, "connection") else { continue }
            FieldNames.forEachToken(bytes, field.value) { token in
                if FieldNames.equal(bytes, token, "upgrade") { connectionUpgrade = true }
            }
        }
        return connectionUpgrade && upgrade
    }
}
