import COpenSSL
import Foundation

/// What makes a set of CA files unusable for minting (docs/contract.md §3
/// "Interception certificates"): `check`, `run` and a reload refuse each,
/// naming the config key the problem lies in.
public struct CAFileProblem: Sendable, Hashable, CustomStringConvertible {
    /// The `ca:` key whose file is at fault.
    public enum Field: String, Sendable {
        case certificate = "cert"
        case key
        case chain
    }

    public let field: Field
    public let message: String

    public var description: String { message }
}

extension Certificate {
    /// `basicConstraints CA:TRUE`, and `keyCertSign` when a keyUsage extension
    /// is present (an absent keyUsage allows every use, RFC 5280 §4.2.1.3).
    public var canSignCertificates: Bool {
        let flags = X509_get_extension_flags(ref)
        guard flags & UInt32(EXFLAG_INVALID) == 0, flags & UInt32(EXFLAG_CA) != 0 else { return false }
        return flags & UInt32(EXFLAG_KUSAGE) == 0 || X509_get_key_usage(ref) & UInt32(KU_KEY_CERT_SIGN) != 0
    }

    /// Self-issued and its signature checks out under its own key: a root.
    public var isSelfSigned: Bool {
        let result = X509_self_signed(ref, 1) == 1
        OpenSSLErrorQueue.clear()
        return result
    }

    /// True when `issuer` names this certificate's issuer (name and key
    /// identifier) and its key verifies this certificate's signature.
    public func isSigned(by issuer: Certificate) -> Bool {
        defer { OpenSSLErrorQueue.clear() }
        guard X509_check_issued(issuer.ref, ref) == X509_V_OK, let key = X509_get0_pubkey(issuer.ref) else { return false }
        return X509_verify(ref, key) == 1
    }

    var hasSubjectKeyIdentifier: Bool { X509_get0_subject_key_id(ref) != nil }
}

extension CertificateAuthority {
    /// Every reason `certificate`, `key` (nil: not readable here, judged
    /// elsewhere) and `chain` (the certificates above `certificate`, nearest
    /// first) cannot mint leaves clients accept. Empty when they can.
    public static func problems(certificate: Certificate, key: PrivateKey?, chain: [Certificate]) -> [CAFileProblem] {
        var problems: [CAFileProblem] = []
        if !certificate.canSignCertificates {
            problems.append(CAFileProblem(field: .certificate, message:
                "the CA certificate \(certificate.subject) is not a CA certificate (it needs basicConstraints CA:TRUE and, "
                + "when it has keyUsage, keyCertSign): have it issued with basicConstraints=critical,CA:TRUE,pathlen:0 "
                + "and keyUsage=critical,keyCertSign,cRLSign"))
        }
        if let key, X509_check_private_key(certificate.ref, key.ref) != 1 {
            OpenSSLErrorQueue.clear()
            problems.append(CAFileProblem(field: .key, message:
                "the CA key does not belong to the CA certificate \(certificate.subject): point ca.key at the key the "
                + "certificate was issued for (the one `pinproxy ca csr` signed the request with)"))
        }
        var below = certificate
        for (index, above) in chain.enumerated() {
            // Asked first: OpenSSL's issuer check also refuses an issuer without keyCertSign.
            if !above.canSignCertificates {
                problems.append(CAFileProblem(field: .chain, message:
                    "certificate \(index + 1) of the chain (\(above.subject)) is not a CA certificate (no basicConstraints CA:TRUE "
                    + "or no keyCertSign): list only the issuing CAs above ca.cert"))
                break
            }
            if !below.isSigned(by: above) {
                problems.append(CAFileProblem(field: .chain, message:
                    "certificate \(index + 1) of the chain (\(above.subject)) did not sign \(below.subject) (issuer \(below.issuer)): "
                    + "list the issuing certificates in order, each signed by the next, starting with the issuer of ca.cert"))
                break
            }
            below = above
        }
        return problems
    }
}
