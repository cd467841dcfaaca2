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
