import Foundation
import PinproxyTestSupport
import Testing

/// A child process ends with the test process that started it, however
/// that ends. A test process that crashed (a trap runs no atexit cleanup)
/// once left the `pinproxy run` servers its end-to-end tests had started
/// serving on, an hour later; now each child is spawned with SIGTERM as its
/// parent-death signal, from a thread that lives as long as the process.
@Suite("Children end with the test process", .blockingWaits)
struct ChildProcessLifetimeTests {
    /// Prints the child's parent-death signal (prctl(PR_GET_PDEATHSIG)):
    /// 15 is SIGTERM, 0 none.
    static let printDeathSignal =
        "import ctypes; libc = ctypes.CDLL(None); s = ctypes.c_int(-1); libc.prctl(2, ctypes.byref(s), 0, 0, 0); print(s.value, flush=True)"

    @Test func aChildIsToldToStopWhenTheTestProcessDies() throws {
        let output = try ChildProcess.check("python3", ["-c", Self.printDeathSignal])
        #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == "\(SIGTERM)")
    }

    /// A program that does not exist is an error where it is spawned, as
    /// posix_spawn made it, not a child (setpriv) that fails to start it.
    @Test func aMissingProgramFailsAtItsSpawn() throws {
        let directory = try TemporaryDirectory("pinproxy-child-lifetime")
        // Named through a constant: `SetupScriptTests` requires the setup
        // script to install every program a test spawns by a literal name,
        // and this one is meant to be missing.
        let missing = "/nonexistent/pinproxy-test-program"
        #expect(throws: TestSupportError.self) {
            try ChildProcess(missing, [], directory: directory)
        }
    }

    @Test func aChildOutlivesTheThreadThatStartedIt() throws {
        // The kernel sends the parent-death signal when the spawning *thread*
        // ends; a test's thread may end long before its children are done.
        let directory = try TemporaryDirectory("pinproxy-child-lifetime")
        let started = SpawnedOnAThread(directory: directory)
        try started.spawnOnAThreadThatEnds()
        let child = try #require(started.child)
        defer { child.stop() }
        // The thread has been joined, so it has ended: a signal sent for its
        // end has already been sent. Still running a second on means none was.
        #expect(child.waitForExit(timeout: 1) == nil, "the child exited with \(child.terminationStatus ?? -1)")
        #expect(child.isRunning)
    }
}

/// Starts a child from a thread of its own, which waits until the child has
/// its parent-death signal (set by the child itself, as it starts) and ends;
/// the thread is joined before the test goes on.
private final class SpawnedOnAThread: @unchecked Sendable {
    let directory: TemporaryDirectory
    var child: ChildProcess?
    var failure: (any Error)?

    init(directory: TemporaryDirectory) {
        self.directory = directory
    }

    func spawnOnAThreadThatEnds() throws {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&thread, nil, { context in
            let this = Unmanaged<SpawnedOnAThread>.fromOpaque(context!).takeRetainedValue()
            do {
                let child = try ChildProcess("python3", ["-c", ChildProcessLifetimeTests.printDeathSignal + "; import time; time.sleep(30)"],
                                             directory: this.directory, name: "child")
                this.child = child
                _ = try child.waitForOutput { $0.contains("\n") ? true : nil }
            } catch {
                this.failure = error
            }
            return nil
        }, context)
        guard rc == 0 else { throw TestSupportError("pthread_create: \(rc)") }
        pthread_join(thread, nil)
        if let failure { throw failure }
    }
}
