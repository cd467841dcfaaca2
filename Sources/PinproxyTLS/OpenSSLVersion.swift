import COpenSSL

/// Which OpenSSL this process runs on: the shared library actually loaded
/// (`OpenSSL_version`), which can differ from the headers it was built
/// against after a system update. For `--version` and bug reports.
public enum OpenSSLVersion {
    /// e.g. "OpenSSL 3.0.19 27 Jan 2026".
    public static var runtime: String {
        String(cString: OpenSSL_version(OPENSSL_VERSION))
    }
}
