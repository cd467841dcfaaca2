import Foundation

/// A child process whose output goes to a file the test can poll. Stopped by
/// its own PID when the test is done (or when this value is released).
///
/// Spawned with posix_spawn and reaped with waitpid: Foundation's `Process`
/// learns of exits through a run loop, which a test's threads do not run.
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    public let outputPath: String
    private let lock = NSLock()
    private var exitStatus: Int32?

    public convenience init(_ executable: String, _ arguments: [String], directory: TemporaryDirectory, name: String = UUID().uuidString,
                            environment: [String: String]? = nil, currentDirectory: String? = nil) throws {
        try self.init(executable, arguments, outputPath: directory.file("\(name).out"), errorPath: nil, inputPath: nil,
                      environment: environment, currentDirectory: currentDirectory)
    }

    /// `errorPath` nil: standard error goes to `outputPath` too. `inputPath` nil: /dev/null.
    public init(_ executable: String, _ arguments: [String], outputPath: String, errorPath: String?, inputPath: String?,
                environment: [String: String]? = nil, currentDirectory: String? = nil) throws {
        self.outputPath = outputPath
        var path = try Self.resolve(executable)
        var arguments = arguments
        if let currentDirectory {
            // glibc's posix_spawn_file_actions_addchdir_np is not visible to Swift; env -C is.
            arguments = ["-C", currentDirectory, path] + arguments
            path = "/usr/bin/env"
        }
        // Checked here, as posix_spawn would check it: behind setpriv a
        // missing program would be setpriv's failure in the child, not an error here.
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestSupportError("posix_spawn \(path): not an executable file")
        }
        if FileManager.default.isExecutableFile(atPath: Self.setpriv) {
            // SIGTERM when the test process dies, even by a crash that runs
            // no atexit cleanup: a `pinproxy run` or nginx a crashed test had
            // started would otherwise serve on for good. setpriv (util-linux,
            // in every Debian) sets it and execs the command, whose PID the
            // child keeps.
            arguments = ["--pdeathsig", "TERM", "--", path] + arguments
            path = Self.setpriv
        }
        let environment = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        // Linux sends the parent-death signal when the *thread* that spawned
        // the child ends, so the spawn is made on one that lives as long as
        // the process: the concurrency pool's and Dispatch's threads may end
        // while the child is still wanted.
        let (rc, child) = ParentThread.shared.run { [path, arguments] in
            Self.spawn(path, arguments, environment: environment, outputPath: outputPath, errorPath: errorPath, inputPath: inputPath)
        }
        guard rc == 0 else {
            throw TestSupportError("posix_spawn \(path): \(String(cString: strerror(rc)))")
        }
        pid = child
        TestCleanup.register(pid: child)
    }

    static let setpriv = "/usr/bin/setpriv"

    /// posix_spawn's answer and the child's PID.
    private static func spawn(_ path: String, _ arguments: [String], environment: [String], outputPath: String, errorPath: String?,
                              inputPath: String?) -> (Int32, pid_t) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, inputPath ?? "/dev/null", O_RDONLY, 0)
        closeInheritedDescriptors(&actions)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        if let errorPath {
            posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        } else {
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        var cArgs = ([path] + arguments).map { strdup($0) } + [nil]
        var cEnv = environment.map { strdup($0) } + [nil]
        defer {
            cArgs.forEach { free($0) }
            cEnv.forEach { free($0) }
        }
        // The spawning thread may block signals (the concurrency pool's threads
        // do), and ignored dispositions survive exec: give the child clean ones,
        // or it would never see the SIGTERM that stops it.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var child: pid_t = 0
        let rc = posix_spawn(&child, path, &actions, &attributes, &cArgs, &cEnv)
        return (rc, child)
    }

    deinit {
        stop()
    }

    /// The child gets standard input, output and error, and nothing else of
    /// the test process: tests run side by side, and a socket another test
    /// holds (a raw client it is about to close, to see what the server does
    /// when the app leaves) would otherwise live on in every child spawned
    /// meanwhile, so its close would send no FIN until they exited. glibc
    /// 2.34's `posix_spawn_file_actions_addclosefrom_np`, looked up at run
    /// time: Swift's Glibc module does not show the GNU extensions.
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = closeFromSymbol else { return }
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
    }

    nonisolated(unsafe) private static let closeFromSymbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")

    public var outputText: String {
        TextFile.read(outputPath)
    }

    /// Non-blocking: has the child exited (and been reaped)?
    public var isRunning: Bool {
        lock.withLock {
            if exitStatus != nil { return false }
            var status: Int32 = 0
            let r = waitpid(pid, &status, WNOHANG)
            if r == pid || (r < 0 && errno == ECHILD) {
                exitStatus = r == pid ? Self.decode(status) : -1
                TestCleanup.unregister(pid: pid)
                return false
            }
            return true
        }
    }

    /// Exit code (or 128+signal), once exited.
    public var terminationStatus: Int32? {
        _ = isRunning
        return lock.withLock { exitStatus }
    }

    /// Polls the output until `predicate` finds what it wants, or fails after
    /// `timeout` (an upper bound: the child is an external process, and tests
    /// run side by side on two cores).
    public func waitForOutput<T>(timeout: TimeInterval = 30, _ predicate: (String) -> T?) throws -> T {
        let found = try pollForBlocking(timeout: timeout, every: 0.02) { () throws -> T? in
            if let found = predicate(outputText) { return found }
            guard isRunning else {
                if let found = predicate(outputText) { return found }
                throw TestSupportError("process exited (\(terminationStatus ?? -1)) before the expected output; output:\n\(outputText)")
            }
            return nil
        }
        guard let found else { throw TestSupportError("timed out waiting for process output; output so far:\n\(outputText)") }
        return found
    }

    /// Waits for the child to exit by itself, up to `timeout`; returns its status or nil.
    public func waitForExit(timeout: TimeInterval) -> Int32? {
        pollUntilBlocking(timeout: timeout, every: 0.02) { !isRunning } ? terminationStatus : nil
    }

    /// Sends `signal` to this child only.
    public func signal(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// SIGTERM (then SIGKILL after 5 s) to this process only, and reaps it.
    public func stop() {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        if waitForExit(timeout: 5) == nil {
            kill(pid, SIGKILL)
            _ = waitForExit(timeout: 5)
        }
    }

    private static func decode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }

    /// Runs a command to completion and returns (status, combined output).
    /// Spawned like every child here (not with Foundation's `Process`, whose
    /// exit detection needs a SIGCHLD that the test threads block).
    @discardableResult
    public static func run(_ executable: String, _ arguments: [String], input: String? = nil,
                           environment: [String: String]? = nil, currentDirectory: String? = nil) throws -> (status: Int32, output: String) {
        let result = try runSeparately(executable, arguments, input: input, combined: true,
                                       environment: environment, currentDirectory: currentDirectory)
        return (result.status, result.stdout)
    }

    /// Runs a command to completion: (status, stdout, stderr).
    public static func runSeparately(_ executable: String, _ arguments: [String], input: String? = nil, combined: Bool = false,
                                     environment: [String: String]? = nil, currentDirectory: String? = nil,
                                     timeout: TimeInterval = 600) throws -> (status: Int32, stdout: String, stderr: String) {
        let scratch = try Scratch.directory()
        let id = UUID().uuidString
        let out = scratch.file("\(id).out")
        let err = combined ? nil : scratch.file("\(id).err")
        var inputPath: String?
        if let input {
            inputPath = try scratch.write("\(id).in", input)
        }
        defer {
            for path in [out, err, inputPath].compactMap({ $0 }) { try? FileManager.default.removeItem(atPath: path) }
        }
        let child = try ChildProcess(executable, arguments, outputPath: out, errorPath: err, inputPath: inputPath,
                                     environment: environment, currentDirectory: currentDirectory)
        guard let status = child.waitForExit(timeout: timeout) else {
            child.stop()
            throw TestSupportError("\(executable) \(arguments.joined(separator: " ")) did not finish within \(Int(timeout)) s")
        }
        let stdout = TextFile.read(out)
        let stderr = err.map(TextFile.read) ?? ""
        return (status, stdout, stderr)
    }

    /// Like `run`, but throws with the output when the command fails.
    @discardableResult
    public static func check(_ executable: String, _ arguments: [String], input: String? = nil) throws -> String {
        let (status, output) = try run(executable, arguments, input: input)
        guard status == 0 else {
            throw TestSupportError("\(executable) \(arguments.joined(separator: " ")) exited \(status):\n\(output)")
        }
        return output
    }

    /// One scratch directory per test process for the runners' files.
    private enum Scratch {
        private static let lock = NSLock()
        nonisolated(unsafe) private static var shared: TemporaryDirectory?

        static func directory() throws -> TemporaryDirectory {
            try lock.withLock {
                if let shared { return shared }
                let made = try TemporaryDirectory("pinproxy-run")
                shared = made
                return made
            }
        }
    }

    static func resolve(_ executable: String) throws -> String {
        if executable.contains("/") { return executable }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let candidate = "\(directory)/\(executable)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw TestSupportError("\(executable) is not on PATH")
    }
}
