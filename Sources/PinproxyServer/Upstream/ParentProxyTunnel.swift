import NIOCore
import PinproxyPolicy

/// The upstream leg through a parent proxy (`upstream_proxy:`,
/// docs/contract.md §15): pinproxy dials the parent (through the SSRF guard,
/// like any upstream), asks it for `CONNECT target`, reads its answer head,
/// and only then installs its own layers (TLS with the policy's pins, or a
/// blind tunnel). The parent sees ciphertext only; pins hold end to end.
/// `UpstreamConnectMachine` sequences it; this handler speaks to the parent.
/// A parent's refusal is `connect_failed` naming its status; no answer in
/// time, `upstream_timeout` (the machine's timer).
///
/// Sends one `CONNECT` to the parent and reads its answer head, byte-exact:
/// nothing after the head may be taken from the stream (it is the
/// upstream's TLS), and the parent must not send any before pinproxy speaks.
final class ParentConnectHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    /// A parent's answer head larger than this is refused, not buffered.
    static let maxHeadBytes = 16 * 1024

    private enum State {
        case idle
        case awaitingHead(ByteBuffer)
        case done
    }

    let parent: UpstreamProxy
    let target: HostPort
    let host: String
    let answered: EventLoopPromise<Void>
    private var state = State.idle

    init(parent: UpstreamProxy, target: HostPort, host: String, answered: EventLoopPromise<Void>) {
        self.parent = parent
        self.target = target
        self.host = host
        self.answered = answered
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { sendConnect(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        sendConnect(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failure(ProxyError(.connectFailed, host: host, detail: "parent proxy \(parent) closed the connection before answering CONNECT \(target)")))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failure(ProxyError(.connectFailed, host: host, detail: "parent proxy \(parent): \(UpstreamConnector.describe(error))")))
        context.close(promise: nil)
    }

    private func sendConnect(context: ChannelHandlerContext) {
        guard case .idle = state else { return }
        state = .awaitingHead(context.channel.allocator.buffer(capacity: 256))
        var request = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let credentials = parent.credentials {
            let user = credentials.reveal().prefix { $0 != ":" }
            let password = credentials.reveal().drop { $0 != ":" }.dropFirst()
            request += "Proxy-Authorization: \(ProxyCredential(user: String(user), password: String(password)).headerValue)\r\n"
        }
        request += "\r\n"
        context.writeAndFlush(NIOAny(context.channel.allocator.buffer(string: request)), promise: nil)
        context.read()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .awaitingHead(var buffer) = state else { return }
        var incoming = unwrapInboundIn(data)
        buffer.writeBuffer(&incoming)
        let bytes = buffer.readableBytesView
        guard let end = Self.headEnd(bytes) else {
            state = .awaitingHead(buffer)
            if buffer.readableBytes > Self.maxHeadBytes {
                finish(.failure(ProxyError(.connectFailed, host: host, detail: "parent proxy \(parent) sent an answer head over \(Self.maxHeadBytes) bytes")))
                context.close(promise: nil)
            }
            return
        }
        let head = String(decoding: bytes[bytes.startIndex..<end], as: UTF8.self)
        let statusLine = head.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? ""
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            finish(.failure(ProxyError(.connectFailed, host: host, detail: "parent proxy \(parent) answered CONNECT with something that is not HTTP")))
            context.close(promise: nil)
            return
        }
        guard (200..<300).contains(status) else {
            finish(.failure(ProxyError(.connectFailed, host: host,
                                       detail: "parent proxy \(parent) refused CONNECT \(target): \(statusLine.dropFirst(parts[0].count + 1))")))
            context.close(promise: nil)
            return
        }
        guard end + 4 == bytes.endIndex else {
            // Bytes the parent sent unasked would be taken for the upstream's TLS.
            finish(.failure(ProxyError(.connectFailed, host: host, detail: "parent proxy \(parent) sent data after its CONNECT answer")))
            context.close(promise: nil)
            return
        }
        finish(.success(()))
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if case .awaitingHead = state { context.read() }
        context.fireChannelReadComplete()
    }

    private func finish(_ result: Result<Void, any Error>) {
        guard case .awaitingHead = state else {
            if case .idle = state, case .failure(let error) = result { state = .done; answered.fail(error) }
            return
        }
        state = .done
        answered.completeWith(result)
    }

    /// The index of the `\r\n\r\n` ending the head, if it has arrived.
    static func headEnd(_ bytes: ByteBufferView) -> Int? {
        var index = bytes.startIndex
        while index + 3 < bytes.endIndex {
            if bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 { return index }
            index += 1
        }
        return nil
    }
}
