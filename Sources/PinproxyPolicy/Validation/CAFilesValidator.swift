import Foundation
import PinproxyTLS

/// Checks the interception CA's certificate, key and chain the way `run`
/// will use them (docs/contract.md §3 "Interception certificates"): a
/// certificate that is no CA, a key that is not its key, a chain that does
/// not chain it. `check`, `run` and a reload all refuse these, each at the
/// `ca:` key it concerns; the file-presence and mode checks are
/// MainConfigValidator's.
struct CAFilesValidator {
    let config: PinproxyConfig

    func validate(into bag: DiagnosticBag) {
        let ca = config.ca
        let fm = FileManager.default
        if let chainPath = ca.chainPath, !fm.fileExists(atPath: chainPath) {
            bag.error(location("chain"), "ca.chain \(chainPath) does not exist: write the certificates above ca.cert there "
                      + "(nearest first), or remove ca.chain when ca.cert is itself the root clients trust")
            return
        }
        guard fm.fileExists(atPath: ca.certificatePath) else {
            if ca.chainPath != nil, !fm.fileExists(atPath: ca.keyPath) {
                bag.error(location("cert"), "CA certificate \(ca.certificatePath) does not exist while ca.chain is set: run "
                          + "`pinproxy ca csr` and install the certificate your organisation's CA issues for it, or remove "
                          + "ca.chain to have pinproxy create its own CA")
            }
            return  // otherwise created at the first start, or said by MainConfigValidator
        }
        let certificate: Certificate
        do {
            certificate = try Certificate.loadPEM(file: ca.certificatePath)[0]
        } catch {
            bag.error(location("cert"), "CA certificate \(ca.certificatePath) cannot be used: \(Self.reason(error)): "
                      + "point ca.cert at the CA's PEM certificate")
            return
        }
        var chain: [Certificate] = []
        do {
            chain = try CertificateAuthority.loadChain(ca.chainPath, above: certificate)
        } catch {
            bag.error(location("chain"), "ca.chain \(ca.chainPath ?? "") cannot be used: \(Self.reason(error)): "
                      + "write the PEM certificates above ca.cert there, nearest first")
        }
        // A key that is missing, unreadable or readable by others is said by
        // MainConfigValidator; only a key this process can parse is matched.
        var key: PrivateKey?
        if MainConfigValidator.unreadable(ca.keyPath) == nil {
            do {
                key = try PrivateKey(pemFile: ca.keyPath)
            } catch {
                bag.error(location("key"), "CA key \(ca.keyPath) cannot be used: \(Self.reason(error)): "
                          + "point ca.key at the PEM private key of ca.cert")
            }
        }
        for problem in CertificateAuthority.problems(certificate: certificate, key: key, chain: chain) {
            bag.error(location(problem.field.rawValue), problem.message)
        }
    }

    private func location(_ key: String) -> SourceLocation { config.sourceMap["ca.\(key)"] }

    private static func reason(_ error: any Error) -> String {
        (error as? TLSError)?.reason ?? "\(error)"
    }
}
