import COpenSSL
import Foundation

/// An owned X.509 certificate. Immutable once parsed, so it may be shared
/// across threads; every other module sees this type, never an `X509*`.
public final class Certificate: @unchecked Sendable, Hashable, CustomStringConvertible {
    let ref: OpaquePointer

    init(takingOwnershipOf ref: OpaquePointer) {
        self.ref = ref
    }

    /// Wraps a certificate owned by OpenSSL (a chain entry) with a reference of our own.
    init(retaining ref: OpaquePointer) {
        X509_up_ref(ref)
        self.ref = ref
    }

    deinit {
        X509_free(ref)
    }

    public convenience init(derBytes: [UInt8]) throws {
        OpenSSLErrorQueue.clear()
        let parsed: OpaquePointer? = derBytes.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)
        }
        guard let parsed else {
            throw TLSError.configuration(OpenSSLErrorQueue.drainReason(or: "not a DER certificate"))
        }
        self.init(takingOwnershipOf: parsed)
    }

    /// Every certificate in PEM data, in file order. Throws when there is none.
    public static func parsePEM(_ bytes: [UInt8], source: String = "PEM data") throws -> [Certificate] {
        try MemoryBIO.withReadOnly(bytes) { bio in
            var certificates: [Certificate] = []
            while true {
                OpenSSLErrorQueue.clear()
                guard let x509 = PEM_read_bio_X509(bio, nil, nil, nil) else { break }
                certificates.append(Certificate(takingOwnershipOf: x509))
            }
            // The loop ends on "no start line" at EOF; that is not an error.
            OpenSSLErrorQueue.clear()
            guard !certificates.isEmpty else {
                throw TLSError.configuration("no PEM certificate found in \(source)")
            }
            return certificates
        }
    }

    public static func loadPEM(file path: String) throws -> [Certificate] {
        try parsePEM(try FileBytes.read(path), source: path)
    }

    // MARK: Encodings

    public var derBytes: [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(ref, &out)
        guard length > 0, let out else { return [] }
        defer { CPinproxy_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    public var pemString: String {
        let bytes = (try? MemoryBIO.collect { PEM_write_bio_X509($0, self.ref) }) ?? []
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: Pins (RFC 7469)

    /// DER of the SubjectPublicKeyInfo: what an SPKI pin hashes.
    public var subjectPublicKeyInfoDER: [UInt8] {
        guard let pubkey = X509_get_X509_PUBKEY(ref) else { return [] }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509_PUBKEY(pubkey, &out)
        guard length > 0, let out else { return [] }
        defer { CPinproxy_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// Base64 SHA-256 of the SubjectPublicKeyInfo DER: the `spki_sha256` pin.
    public var spkiSHA256: String { SHA256Digest.base64(subjectPublicKeyInfoDER) }

    /// Base64 SHA-256 of the whole certificate DER: the `cert_sha256` pin.
    public var certificateSHA256: String { SHA256Digest.base64(derBytes) }

    /// Hex SHA-256 fingerprint, colon-separated, as `openssl x509 -fingerprint -sha256` prints it.
    public var fingerprintSHA256: String {
        SHA256Digest.hash(derBytes).map { String(format: "%02X", $0) }.joined(separator: ":")
    }

    // MARK: Names and dates

    /// The subject as one RFC 2253 line (`CN=api.spotify.com,O=…`).
    public var subject: String { Self.format(X509_get_subject_name(ref)) }
    public var issuer: String { Self.format(X509_get_issuer_name(ref)) }

    public var notBefore: Date { Self.date(X509_get0_notBefore(ref)) }
    public var notAfter: Date { Self.date(X509_get0_notAfter(ref)) }

    /// DNS names and IP addresses of the subjectAltName extension.
    public var subjectAlternativeNames: [String] {
        guard let raw = X509_get_ext_d2i(ref, NID_subject_alt_name, nil, nil) else { return [] }
        let names = OpaquePointer(raw)
        defer { GENERAL_NAMES_free(names) }
        var result: [String] = []
        for i in 0..<OPENSSL_sk_num(names) {
            guard let entry = OPENSSL_sk_value(names, i)?.assumingMemoryBound(to: GENERAL_NAME.self) else { continue }
            switch entry.pointee.type {
            case GEN_DNS:
                let ia5 = entry.pointee.d.dNSName!
                result.append(String(decoding: UnsafeBufferPointer(start: ASN1_STRING_get0_data(ia5), count: Int(ASN1_STRING_length(ia5))), as: UTF8.self))
            case GEN_IPADD:
                let octets = entry.pointee.d.iPAddress!
                let bytes = Array(UnsafeBufferPointer(start: ASN1_STRING_get0_data(octets), count: Int(ASN1_STRING_length(octets))))
                result.append(IPAddressText.format(bytes))
            default:
                continue
            }
        }
        return result
    }

    public var description: String { "Certificate(subject: \(subject), spki: \(spkiSHA256))" }

    public static func == (lhs: Certificate, rhs: Certificate) -> Bool {
        lhs === rhs || X509_cmp(lhs.ref, rhs.ref) == 0
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(derBytes)
    }

    private static func format(_ name: OpaquePointer?) -> String {
        guard let name else { return "" }
        let bytes = (try? MemoryBIO.collect { bio in
            X509_NAME_print_ex(bio, name, 0, CPinproxy_XN_FLAG_RFC2253()) >= 0 ? 1 : 0
        }) ?? []
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date {
        guard let time else { return .distantPast }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return .distantPast }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
    }
}

/// Text forms of the raw IP addresses found in certificates.
enum IPAddressText {
    static func format(_ bytes: [UInt8]) -> String {
        if bytes.count == 4 {
            return bytes.map(String.init).joined(separator: ".")
        }
        guard bytes.count == 16 else { return bytes.map { String(format: "%02x", $0) }.joined() }
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: bytes) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count))
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// True when `text` is an IPv4 or IPv6 literal (for SAN IP and hostname checks).
    static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}
