import PinproxyTLS

/// A client password hash as `pinproxy passwd` prints it and the config
/// holds it (docs/contract.md §15):
///
///     $pbkdf2-sha256$i=ITERATIONS$SALT$HASH
///
/// SALT and HASH are standard base64 with padding; the salt is 16 random
/// bytes, the hash 32 bytes of PBKDF2-HMAC-SHA-256. The form follows
/// passlib's modular crypt strings, with the iteration count named.
public struct PasswordHash: Sendable, Hashable, CustomStringConvertible {
    public static let scheme = "pbkdf2-sha256"
    public static let saltLength = 16
    public static let hashLength = 32
    /// Fewer rounds than this make a stolen config cheap to brute-force.
    public static let minimumIterations = 10_000
    /// More than this makes one verification take seconds on the event loop.
    public static let maximumIterations = 10_000_000

    public let iterations: Int
    public let salt: [UInt8]
    public let hash: [UInt8]

    public init(iterations: Int, salt: [UInt8], hash: [UInt8]) {
        self.iterations = iterations
        self.salt = salt
        self.hash = hash
    }

    /// Hashes `password` with a fresh random salt.
    public static func make(password: String, iterations: Int) -> PasswordHash {
        let salt = SecureRandom.bytes(saltLength)
        let hash = PBKDF2SHA256.derive(password: Array(password.utf8), salt: salt, iterations: iterations, length: hashLength)
        return PasswordHash(iterations: iterations, salt: salt, hash: hash)
    }

    /// Whether `password` hashes to this hash, compared in constant time.
    public func verify(_ password: String) -> Bool {
        let derived = PBKDF2SHA256.derive(password: Array(password.utf8), salt: salt, iterations: iterations, length: hash.count)
        return ConstantTime.equals(derived, hash)
    }

    /// The text form. It is not a secret as such, but it is brute-forceable:
    /// kept out of logs all the same (`description` does not show it).
    public var encoded: String {
        "$\(Self.scheme)$i=\(iterations)$\(Base64.encode(salt))$\(Base64.encode(hash))"
    }

    public var description: String { "PasswordHash(\(Self.scheme), i=\(iterations))" }

    /// Parses the text form; the error says what is wrong, for `check`.
    public init(parsing text: String) throws(PasswordHashError) {
        let parts = text.trimmingWhitespace().split(separator: "$", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 5, parts[0].isEmpty else {
            throw PasswordHashError("is not `$\(Self.scheme)$i=ITERATIONS$SALT$HASH` (make one with `pinproxy passwd`)")
        }
        guard parts[1] == Self.scheme else {
            throw PasswordHashError("uses scheme `\(parts[1])`; pinproxy knows only `\(Self.scheme)` (make one with `pinproxy passwd`)")
        }
        guard parts[2].hasPrefix("i="), let iterations = Int(parts[2].dropFirst(2)) else {
            throw PasswordHashError("has `\(parts[2])` where `i=ITERATIONS` belongs")
        }
        guard iterations >= Self.minimumIterations, iterations <= Self.maximumIterations else {
            throw PasswordHashError("has \(iterations) iterations; between \(Self.minimumIterations) and \(Self.maximumIterations) are accepted")
        }
        guard let salt = Base64.decode(parts[3]), salt.count >= 8 else {
            throw PasswordHashError("has a salt that is not at least 8 bytes of base64")
        }
        guard let hash = Base64.decode(parts[4]), hash.count == Self.hashLength else {
            throw PasswordHashError("has a hash that is not \(Self.hashLength) bytes of base64")
        }
        self.init(iterations: iterations, salt: salt, hash: hash)
    }
}

public struct PasswordHashError: Error, Sendable, Hashable {
    public var message: String
    public init(message: String) { self.message = message }
    init(_ message: String) { self.message = message }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}

/// The work factor `pinproxy passwd` uses: PBKDF2-SHA-256 rounds that cost
/// about 50 ms on one core of a current server (docs/contract.md §15: 200,000
/// measured 62–72 ms of CPU time on an AMD EPYC, so 150,000); it is written
/// into each hash, so raising it later keeps old hashes valid.
public enum PasswordWorkFactor {
    public static let defaultIterations = 150_000
}
