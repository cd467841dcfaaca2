import ArgumentParser
import Foundation
import PinproxyPolicy

/// `pinproxy passwd` (docs/contract.md §15): a password on standard input, a
/// hash to paste under `clients.identities.NAME.password_hash` out.
struct PasswdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passwd",
        abstract: "Hash a client password for clients.identities (salted PBKDF2-SHA256).",
        discussion: """
        Reads the password from standard input (not echoed when it is a terminal; one line, the \
        line break removed) and prints `$pbkdf2-sha256$i=ITERATIONS$SALT$HASH` (salt and hash in \
        base64): paste it as `password_hash`, or write it to the file `password_hash_file` names. \
        The default work factor costs about 50 ms per check; each hash carries its own count.
        """)

    @Option(name: .long, help: "PBKDF2 iterations.")
    var iterations: Int = PasswordWorkFactor.defaultIterations

    func validate() throws {
        guard (PasswordHash.minimumIterations...PasswordHash.maximumIterations).contains(iterations) else {
            throw ValidationError("--iterations must be between \(PasswordHash.minimumIterations) and \(PasswordHash.maximumIterations)")
        }
    }

    func run() throws {
        guard let password = Self.readPassword(), !password.isEmpty else {
            FileHandle.standardError.write(Data("pinproxy passwd: no password on standard input\n".utf8))
            throw ExitCode(1)
        }
        print(PasswordHash.make(password: password, iterations: iterations).encoded)
    }

    /// One line of standard input; on a terminal, prompted for with echo off.
    private static func readPassword() -> String? {
        guard isatty(STDIN_FILENO) == 1 else { return readLine(strippingNewline: true) }
        var saved = termios()
        tcgetattr(STDIN_FILENO, &saved)
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        FileHandle.standardError.write(Data("Password: ".utf8))
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        defer {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
            FileHandle.standardError.write(Data("\n".utf8))
        }
        return readLine(strippingNewline: true)
    }
}
