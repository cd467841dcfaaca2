import COpenSSL
import Foundation

/// Builds and signs X.509 v3 certificates with OpenSSL: the interception CA
/// (self-signed) and the leaves it mints. SHA-256 signatures, random 127-bit
/// serials, extensions given in OpenSSL's config syntax.
struct CertificateBuilder {
    var subjectCommonName: String
    var subjectOrganization: String?
    var notBefore: Date
    var notAfter: Date
    /// (extension name, OpenSSL config value), e.g. ("basicConstraints", "critical,CA:TRUE").
    var extensions: [(String, String)]

    /// Signs with `issuerKey` as `issuer`, or self-signs when `issuer` is nil.
    func build(publicKey: PrivateKey, issuer: Certificate?, issuerKey: PrivateKey) throws -> Certificate {
        OpenSSLErrorQueue.clear()
        guard let x509 = X509_new() else { throw Self.failure("X509_new") }
        let certificate = Certificate(takingOwnershipOf: x509)  // frees x509 on any throw below

        guard X509_set_version(x509, 2) == 1 else { throw Self.failure("X509_set_version") }
        try setRandomSerial(x509)
        guard ASN1_TIME_set(X509_getm_notBefore(x509), time_t(notBefore.timeIntervalSince1970)) != nil,
              ASN1_TIME_set(X509_getm_notAfter(x509), time_t(notAfter.timeIntervalSince1970)) != nil else {
            throw Self.failure("ASN1_TIME_set")
        }

        let name = X509_get_subject_name(x509)
        try Self.add("CN", String(subjectCommonName.prefix(64)), to: name)
        if let subjectOrganization {
            try Self.add("O", subjectOrganization, to: name)
        }
        let issuerName = issuer.map { X509_get_subject_name($0.ref) } ?? name
        guard X509_set_issuer_name(x509, issuerName) == 1 else { throw Self.failure("X509_set_issuer_name") }
        guard X509_set_pubkey(x509, publicKey.ref) == 1 else { throw Self.failure("X509_set_pubkey") }

        var v3 = X509V3_CTX()
        CPinproxy_X509V3_set_ctx_nodb(&v3)
        X509V3_set_ctx(&v3, issuer?.ref ?? x509, x509, nil, nil, 0)
        for (extensionName, value) in extensions {
            guard let ext = X509V3_EXT_conf(nil, &v3, extensionName, value) else {
                throw Self.failure("extension \(extensionName)=\(value)")
            }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x509, ext, -1) == 1 else { throw Self.failure("X509_add_ext") }
        }

        guard X509_sign(x509, issuerKey.ref, EVP_sha256()) > 0 else { throw Self.failure("X509_sign") }
        return certificate
    }

    private func setRandomSerial(_ x509: OpaquePointer) throws {
        var bytes = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&bytes, Int32(bytes.count)) == 1 else { throw Self.failure("RAND_bytes") }
        bytes[0] &= 0x7f  // positive
        bytes[0] |= 0x01  // and never shorter than 16 bytes
        guard let bn = BN_bin2bn(bytes, Int32(bytes.count), nil) else { throw Self.failure("BN_bin2bn") }
        defer { BN_free(bn) }
        guard BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x509)) != nil else { throw Self.failure("BN_to_ASN1_INTEGER") }
    }

    private static func add(_ field: String, _ value: String, to name: OpaquePointer?) throws {
        let bytes = Array(value.utf8)
        guard X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, bytes, Int32(bytes.count), -1, 0) == 1 else {
            throw failure("name entry \(field)")
        }
    }

    private static func failure(_ step: String) -> TLSError {
        .configuration("certificate building failed at \(step): \(OpenSSLErrorQueue.drainReason(or: "unknown OpenSSL error"))")
    }
}
