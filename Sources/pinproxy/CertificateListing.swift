import Foundation
import PinproxyPolicy
import PinproxyTLS

/// How `pin` and `ca show` print certificates (docs/contract.md §10).
enum CertificateListing {
    enum Format: String, CaseIterable {
        case text
        case yaml
    }

    /// `sha256/BASE64  subject=…  issuer=…  not_after=RFC3339`, one line a certificate,
    /// or a YAML list ready to paste under `spki_sha256:` (pin, not_after, note).
    static func render(_ certificates: [Certificate], format: Format) -> String {
        switch format {
        case .text:
            return certificates.map { c in
                "sha256/\(c.spkiSHA256)  subject=\(c.subject)  issuer=\(c.issuer)  not_after=\(rfc3339(c.notAfter))"
            }.joined(separator: "\n") + "\n"
        case .yaml:
            // `not_after` is the certificate's own: a pin must not outlive the key it names.
            return certificates.map { c in
                "- pin: \"\(c.spkiSHA256)\"\n  not_after: \(rfc3339(c.notAfter))\n"
                    + "  note: \(yamlQuoted("\(c.subject), expires \(rfc3339(c.notAfter))"))"
            }.joined(separator: "\n") + "\n"
        }
    }

    static func rfc3339(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: date)
    }

    /// A double-quoted YAML scalar (subjects hold commas, colons and quotes):
    /// a JSON string literal is one.
    static func yamlQuoted(_ text: String) -> String {
        JSONString.quote(text)
    }
}
