import CPinproxyBuildInfo
import PinproxyTLS

/// `pinproxy --version`: the release, the commit it was built from, and the
/// OpenSSL it runs on.
///
/// The commit is baked in at build time from the `PINPROXY_COMMIT`
/// environment variable (`scripts/build-release`, the Dockerfile), never read
/// from git at run time: the binary runs where no checkout is, and a checkout
/// beside it may be at another commit. A plain `swift build` has none and
/// says so.
enum VersionText {
    static let release = "0.1.0"

    static var commit: String {
        let baked = String(cString: pinproxy_build_commit())
        return baked.isEmpty ? "unknown (built without PINPROXY_COMMIT)" : baked
    }

    static var text: String {
        "pinproxy \(release)\ncommit \(commit)\n\(OpenSSLVersion.runtime)"
    }
}
