/// What `pin --connect` tells the user after OpenSSL refused the chain. Only
/// a missing or untrusted issuer is something a policy's `ca_file` can fix;
/// a certificate for another name, or an expired one, is refused whatever the
/// trust store holds, so the hint must not send anyone to `ca_file` for it.
enum VerifyHint {
    static func hint(_ verifyResult: String, serverName: String) -> String {
        let result = verifyResult.lowercased()
        if result.contains("hostname mismatch") || result.contains("ip address mismatch") || result.contains("email address mismatch") {
            return "the certificate is not valid for \(serverName): pinproxy would refuse it (verify_failed) whatever the trust store; "
                + "check the name (--servername, the policy's match), and that this is the server you meant"
        }
        if result.contains("expired") || result.contains("not yet valid") {
            return "pinproxy would refuse this chain (verify_failed) whatever the trust store, until the server sends a certificate valid now"
        }
        if result.contains("issuer") || result.contains("self-signed") || result.contains("self signed")
            || result.contains("unable to verify the first certificate") || result.contains("untrusted") {
            return "pinproxy would refuse this chain (verify_failed) unless the policy's ca_file trusts its root (--ca-file to try one here)"
        }
        return "pinproxy would refuse this chain (verify_failed)"
    }
}
