import COpenSSL
import Foundation

/// A PKCS#10 request for the interception key (`pinproxy ca csr`), for an
/// organisation's CA to sign as an intermediate. It asks for what pinproxy
/// needs of the certificate (CA:TRUE, pathlen:0, keyCertSign); the signer
/// decides what the certificate finally says, and `check` judges that.
public enum CertificateSigningRequest {
    /// The request in PEM, signed with `key` (SHA-256).
    public static func pem(key: PrivateKey, commonName: String, organization: String?) throws -> String {
        OpenSSLErrorQueue.clear()
        guard let request = X509_REQ_new() else { throw failure("X509_REQ_new") }
        defer { X509_REQ_free(request) }
        guard X509_REQ_set_version(request, 0) == 1 else { throw failure("X509_REQ_set_version") }
        guard let name = X509_NAME_new() else { throw failure("X509_NAME_new") }
        defer { X509_NAME_free(name) }
        // The usual order, broadest first: O=…, CN=… (printed CN=…,O=… in RFC 2253).
        if let organization { try add("O", organization, to: name) }
        try add("CN", String(commonName.prefix(64)), to: name)
        guard X509_REQ_set_subject_name(request, name) == 1 else { throw failure("X509_REQ_set_subject_name") }
        guard X509_REQ_set_pubkey(request, key.ref) == 1 else { throw failure("X509_REQ_set_pubkey") }

        var v3 = X509V3_CTX()
        CPinproxy_X509V3_set_ctx_nodb(&v3)
        X509V3_set_ctx(&v3, nil, nil, request, nil, 0)
        guard let extensions = OPENSSL_sk_new_null() else { throw failure("OPENSSL_sk_new_null") }
        defer { OPENSSL_sk_pop_free(extensions) { X509_EXTENSION_free(OpaquePointer($0)) } }
        for (extensionName, value) in [
            ("basicConstraints", "critical,CA:TRUE,pathlen:0"),
            ("keyUsage", "critical,keyCertSign,cRLSign"),
        ] {
            guard let ext = X509V3_EXT_conf(nil, &v3, extensionName, value) else { throw failure("extension \(extensionName)") }
            guard OPENSSL_sk_push(extensions, UnsafeRawPointer(ext)) > 0 else {
                X509_EXTENSION_free(ext)
                throw failure("OPENSSL_sk_push")
            }
        }
        guard X509_REQ_add_extensions(request, extensions) == 1 else { throw failure("X509_REQ_add_extensions") }
        guard X509_REQ_sign(request, key.ref, EVP_sha256()) > 0 else { throw failure("X509_REQ_sign") }
        let bytes = try MemoryBIO.collect { PEM_write_bio_X509_REQ($0, request) }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func add(_ field: String, _ value: String, to name: OpaquePointer) throws {
        let bytes = Array(value.utf8)
        guard X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, bytes, Int32(bytes.count), -1, 0) == 1 else {
            throw failure("name entry \(field)")
        }
    }

    private static func failure(_ step: String) -> TLSError {
        .configuration("certificate request failed at \(step): \(OpenSSLErrorQueue.drainReason(or: "unknown OpenSSL error"))")
    }
}
