/// Target `response`: the upstream's bytes. The first byte picks the request
/// the app sends in an intercepted session (and whether the upstream closes
/// after its bytes); the rest, cut into reads, is what the upstream answers.
/// Then the app sends another request on the same connection, answered well,
/// so what the first answer left behind is exercised too.
enum ResponseTarget {
    static let requests = [
        "GET /a HTTP/1.1\r\nHost: intercept.test\r\n\r\n",
        "HEAD /a HTTP/1.1\r\nHost: intercept.test\r\n\r\n",
        "POST /a HTTP/1.1\r\nHost: intercept.test\r\nContent-Length: 5\r\n\r\nhello",
        "POST /a HTTP/1.1\r\nHost: intercept.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "GET /a HTTP/1.1\r\nHost: intercept.test\r\nConnection: close\r\n\r\n",
        "GET /a HTTP/1.0\r\nHost: intercept.test\r\n\r\n",
        "POST /a HTTP/1.1\r\nHost: intercept.test\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
        "GET /a HTTP/1.1\r\nHost: intercept.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    ]

    static func run(_ input: [UInt8]) {
        guard let mode = input.first else { return }
        let session = FuzzSession(intercepted: true)
        session.clientSends(ArraySlice(requests[Int(mode) % requests.count].utf8))
        for segment in FuzzInput.segments(input.dropFirst()) {
            session.upstreamSends(segment)
        }
        if mode & 0x80 != 0 { session.upstreamCloses() }
        session.clientSends(ArraySlice("GET /b HTTP/1.1\r\nHost: intercept.test\r\n\r\n".utf8))
        session.upstreamsAnswer()
        session.finish()
    }
}
