import Foundation
import NIOCore

/// What a completed handshake settled, for callers (metrics, pin evaluation, logs).
public struct TLSHandshakeInfo: Sendable {
    /// The negotiated version, and OpenSSL's name for it ("TLSv1.3").
    public var version: TLSVersion?
    public var versionName: String
    /// The negotiated cipher as OpenSSL names it ("TLS_AES_128_GCM_SHA256").
    public var cipher: String
    public var applicationProtocol: String?
    /// Client: the SNI sent. Server: the SNI the client asked for, if any.
    public var serverName: String?
    /// True when the session was resumed (no full handshake).
    public var resumed: Bool
    /// Client: the chain OpenSSL verified, leaf → root (with `.reportOnly`
    /// verification, the chain the server sent). Server: the client's chain, if any.
    public var peerChain: [Certificate]
    /// The chain exactly as the peer sent it, leaf first.
    public var sentChain: [Certificate]
    /// OpenSSL's verify result text ("ok" when the chain verified).
    public var verifyResult: String
    public var verified: Bool

    public var leafNotAfter: Date? { peerChain.first?.notAfter ?? sentChain.first?.notAfter }
}

/// The certificate and key a server presents on one connection.
public struct TLSCertifiedKey: Sendable {
    public var chain: [Certificate]
    public var privateKey: PrivateKey

    public init(chain: [Certificate], privateKey: PrivateKey) {
        self.chain = chain
        self.privateKey = privateKey
    }
}

/// A certificate selector's answer.
public enum TLSCertificateChoice {
    /// At hand: served from inside OpenSSL's certificate callback, so the
    /// handshake goes on in the same step (an interception's leaf is known
    /// from the CONNECT, and the CA's cache usually holds it).
    case ready(TLSCertifiedKey)
    /// No certificate: the handshake fails with this reason.
    case failed(any Error)
    /// Not yet: the handshake pauses and resumes on a later tick of the
    /// connection's loop once the future completes (on any thread).
    case pending(EventLoopFuture<TLSCertifiedKey>)

    /// `.ready` with what `body` returns, `.failed` with what it throws.
    public init(catching body: () throws -> TLSCertifiedKey) {
        do { self = .ready(try body()) } catch { self = .failed(error) }
    }
}

/// Chooses a server certificate for the SNI a client asked for (nil: no SNI).
/// Called on the connection's event loop from inside OpenSSL's `cert_cb`: it
/// must not touch the channel (the handshake is in progress beneath it).
public typealias TLSCertificateSelector = @Sendable (_ serverName: String?, _ eventLoop: any EventLoop) -> TLSCertificateChoice

/// A caller's verdict on a peer whose chain OpenSSL already verified.
public enum TLSPeerDecision: Sendable {
    case accept
    /// Ends the handshake before any application byte moves; the error is fired
    /// down the pipeline as is (a pin failure carries its own code).
    case reject(any Error & Sendable)
}

/// The step after OpenSSL's chain and hostname checks (docs/contract.md §3, pin evaluation).
public typealias TLSPeerVerifier = @Sendable (TLSHandshakeInfo) -> TLSPeerDecision

/// Fired through the pipeline once the handshake (and the caller's verification) is done.
public enum TLSUserEvent: Sendable {
    case handshakeCompleted(TLSHandshakeInfo)
}
