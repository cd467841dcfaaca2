/// The request methods NIO's HTTP/1 decoder accepts: llhttp's HTTP method
/// table, as NIO builds it (a method outside it is refused there, so it is
/// refused here).
enum RequestMethods {
    static let known: [[UInt8]] = [
        "DELETE", "GET", "HEAD", "POST", "PUT", "CONNECT", "OPTIONS", "TRACE",
        "COPY", "LOCK", "MKCOL", "MOVE", "PROPFIND", "PROPPATCH", "SEARCH", "UNLOCK",
        "BIND", "REBIND", "UNBIND", "ACL", "REPORT", "MKACTIVITY", "CHECKOUT", "MERGE",
        "M-SEARCH", "NOTIFY", "SUBSCRIBE", "UNSUBSCRIBE", "PATCH", "PURGE", "MKCALENDAR",
        "LINK", "UNLINK", "SOURCE", "QUERY",
    ].map { Array($0.utf8) }

    /// The known methods by length, so a method is compared with the few of
    /// its own length only.
    private static let byLength: [[[UInt8]]] = {
        var table = [[[UInt8]]](repeating: [], count: longest + 1)
        for method in known { table[method.count].append(method) }
        return table
    }()

    static let longest = known.map(\.count).max()!

    /// Whether `bytes` begin some known method (a method still arriving).
    static func isStart(_ bytes: UnsafeRawBufferPointer) -> Bool {
        known.contains { $0.count >= bytes.count && $0.prefix(bytes.count).elementsEqual(bytes) }
    }

    static func isKnown(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count <= longest else { return false }
        return byLength[bytes.count].contains { $0.elementsEqual(bytes) }
    }
}
