import NIOCore
import NIOHTTP1
@testable import PinproxyServer
import PinproxyTestSupport

/// Target `forward`: an upstream's answer forwarded to the app as its own
/// bytes (`HeadPathDecoder`, `MessageRules.withForwardedFields`,
/// `ResponseWriter.writeForwarded`) against the way it went before: NIO's
/// decoder, `MessageRules.clientHead`, NIO's server encoder
/// (`ForwardedHeadDifferential`). Where both read the answer, the app must
/// get the same bytes, and the head path may keep the connection only
/// where NIO would (or after an unframed answer to a HEAD, which has no
/// body); where NIO refuses it, the head path must too. The first byte picks
/// the request's method (bits 0–1) and whether the app's connection closes
/// after the answer (bit 2); the rest is the upstream's bytes.
enum ForwardTarget {
    static let methods: [HTTPMethod] = [.GET, .HEAD, .POST, .DELETE]

    static func run(_ input: [UInt8]) {
        guard let mode = input.first else { return }
        let method = methods[Int(mode) & 3]
        let closing = mode & 4 != 0
        var nioRefusedAlone = false
        let outcome: ForwardedHeadDifferential.Outcome?
        do {
            outcome = try ForwardedHeadDifferential.run(
                Array(input.dropFirst()), answering: method, closing: closing,
                remake: { MessageRules.clientHead(from: $0, closing: $1) },
                persists: { UpstreamResponseHead.bytes($0).isKeepAlive },
                forward: { MessageRules.writeForwarded($1, closing: $2, to: $0) },
                nioRefusedAlone: &nioRefusedAlone)
        } catch {
            preconditionFailure("an embedded channel failed: \(error)")
        }
        precondition(!nioRefusedAlone, "the head path read an answer NIO's decoder refuses")
        guard let outcome else { return }
        precondition(outcome.forwarded == outcome.remade,
                     "forwarded \(outcome.forwarded.debugDescription) against remade \(outcome.remade.debugDescription)")
        if outcome.keepAlive.bytes && !outcome.keepAlive.nio {
            precondition(method == .HEAD, "the head path keeps a connection NIO's decoder would not")
        }
    }
}
