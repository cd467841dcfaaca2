import PinproxyPolicy

/// A `kind: static` credential's value, read when the config is loaded or
/// reloaded (docs/contract.md §3 `credentials`): a rotated file is picked up
/// by a reload. Failures say which file, never the value.
public enum StaticCredentialValue {
    public static func read(_ credential: StaticCredential) -> Result<Secret, TokenError> {
        switch credential.value {
        case .inline(let secret):
            return .success(secret)
        case .file(let path):
            switch SecretFile.read(path) {
            case .success(let value): return .success(Secret(value))
            case .failure(.missing): return .failure(.misconfigured(reason: "value_file \(path) does not exist"))
            case .failure(.empty): return .failure(.misconfigured(reason: "value_file \(path) is empty"))
            case .failure(.unreadable(let reason)): return .failure(.misconfigured(reason: "value_file unreadable: \(reason)"))
            }
        }
    }
}
