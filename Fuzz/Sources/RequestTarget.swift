/// Target `request`: the app's bytes. The first byte picks the connection
/// (even: an intercepted session for intercept.test after its TLS layer;
/// odd: the listener, absolute-form and CONNECT); the rest is cut into reads.
/// After each read every upstream that has a whole request head answers it.
enum RequestTarget {
    static func run(_ input: [UInt8]) {
        guard let mode = input.first else { return }
        let session = FuzzSession(intercepted: mode & 1 == 0)
        for segment in FuzzInput.segments(input.dropFirst()) {
            session.clientSends(segment)
            session.upstreamsAnswer()
        }
        session.finish()
    }
}
