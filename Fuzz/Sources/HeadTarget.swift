import PinproxyHTTP1
import PinproxyTestSupport

/// Target `head`: the head path (`HeadParser`, `BodyFraming`) against NIO's
/// HTTP/1 decoder on the same bytes. The first byte picks the kind: even, a
/// stream of requests (the app's side); odd, of responses (the upstream's).
/// Every message the head path reads, NIO must read the same: the same
/// method, target, version, status and fields, and a body of the same length
/// (`HTTP1Differential`). The head path may refuse more.
enum HeadTarget {
    static func run(_ input: [UInt8]) {
        guard let mode = input.first else { return }
        let bytes = Array(input.dropFirst())
        let kind: HeadParser.Kind = mode & 1 == 0 ? .request : .response
        if let divergence = HTTP1Differential.divergence(bytes, kind: kind) {
            preconditionFailure("the head path and NIO read \(kind) bytes differently: \(divergence)")
        }
    }
}
