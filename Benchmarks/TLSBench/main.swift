// Handshakes per second and bulk throughput through a TLSHandler client+server
// pair in memory (two EmbeddedChannels, one thread): the cost of pinproxy's TLS
// engine itself, without sockets. bench/tls.sh runs it beside openssl's own
// figures from the same machine and moment; only those ratios mean anything.
import Foundation
import NIOCore
import NIOEmbedded
import PinproxyTLS

struct Pair {
    let client = EmbeddedChannel()
    let server = EmbeddedChannel()

    init(clientContext: TLSContext, serverContext: TLSContext, sessionKey: String) throws {
        try client.pipeline.syncOperations.addHandler(TLSHandler(clientContext: clientContext, serverName: "bench.pinproxy.test", sessionKey: sessionKey))
        try server.pipeline.syncOperations.addHandler(TLSHandler(serverContext: serverContext))
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: 443)
        _ = server.connect(to: address)
        _ = client.connect(to: address)
        try interact()
    }

    /// Moves ciphertext both ways until both sides are quiet; returns plaintext bytes the client read.
    @discardableResult
    func interact() throws -> Int {
        var plaintext = 0
        var progress = true
        while progress {
            progress = false
            while let bytes = try client.readOutbound(as: ByteBuffer.self) { try server.writeInbound(bytes); progress = true }
            while let bytes = try server.readOutbound(as: ByteBuffer.self) { try client.writeInbound(bytes); progress = true }
            while let bytes = try client.readInbound(as: ByteBuffer.self) { plaintext += bytes.readableBytes }
            while try server.readInbound(as: ByteBuffer.self) != nil {}
        }
        return plaintext
    }

    func finish() {
        _ = try? client.finish()
        _ = try? server.finish()
    }
}

func measure(seconds: Double, _ body: () throws -> Int) rethrows -> (count: Int, elapsed: Double) {
    let start = Date()
    var count = 0
    while Date().timeIntervalSince(start) < seconds {
        count += try body()
    }
    return (count, Date().timeIntervalSince(start))
}

let seconds = Double(CommandLine.arguments.dropFirst().first ?? "3") ?? 3
let ca = try CertificateAuthority.create()
let leaf = try ca.leaf(for: "bench.pinproxy.test")
var serverConfiguration = TLSConfiguration.server(certificateChain: leaf.chain, privateKey: leaf.privateKey, minimumVersion: .v1_3)
serverConfiguration.groups = "P-256"
let serverContext = try TLSContext(configuration: serverConfiguration)
func clientContext(resumption: Bool) throws -> TLSContext {
    var configuration = TLSConfiguration.client(minimumVersion: .v1_3, trustRoots: .certificates([ca.certificate]))
    configuration.groups = "P-256"
    configuration.sessionResumption = resumption
    return try TLSContext(configuration: configuration)
}

// Full handshakes: a fresh session each time.
let full = try clientContext(resumption: false)
let fullRun = try measure(seconds: seconds) {
    let pair = try Pair(clientContext: full, serverContext: serverContext, sessionKey: "bench")
    pair.finish()
    return 1
}

// Resumed: one client context keeps the session; the server's ticket arrives
// with the first application bytes, so each connection exchanges one byte.
let resuming = try clientContext(resumption: true)
var resumedCount = 0
let resumedRun = try measure(seconds: seconds) {
    let pair = try Pair(clientContext: resuming, serverContext: serverContext, sessionKey: "bench")
    pair.server.writeAndFlush(ByteBuffer(string: "x"), promise: nil)
    try pair.interact()
    if let handler = try? pair.client.pipeline.syncOperations.handler(type: TLSHandler.self), handler.handshakeInfo?.resumed == true {
        resumedCount += 1
    }
    pair.finish()
    return 1
}

// Bulk: 16 KiB application writes from server to client.
let bulkPair = try Pair(clientContext: full, serverContext: serverContext, sessionKey: "bulk")
let chunk = ByteBuffer(repeating: 0x5a, count: 16_384)
let bulkRun = try measure(seconds: seconds) {
    for _ in 0..<64 { bulkPair.server.write(chunk, promise: nil) }
    bulkPair.server.flush()
    return try bulkPair.interact()
}
bulkPair.finish()

func rate(_ run: (count: Int, elapsed: Double)) -> String { String(format: "%.0f", Double(run.count) / run.elapsed) }
print("pinproxy TLSHandler pair (client+server, one thread, TLS 1.3, P-256 ECDHE + ECDSA):")
print("  full handshakes/s:    \(rate(fullRun))")
print("  resumed handshakes/s: \(rate(resumedRun))  (\(resumedCount) of \(resumedRun.count) resumed)")
print(String(format: "  bulk MB/s:            %.0f", Double(bulkRun.count) / bulkRun.elapsed / 1_000_000))
