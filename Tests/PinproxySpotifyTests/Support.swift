import Foundation
import Logging
import NIOConcurrencyHelpers
import PinproxyPolicy
@testable import PinproxySpotify

/// A clock that follows real time plus an offset the test can push forward,
/// so "past the soft deadline" needs no sleeping while timers still run.
final class TestClock: Sendable {
    private let offset = NIOLockedValueBox<TimeInterval>(0)
    var now: Date { Date().addingTimeInterval(offset.withLockedValue { $0 }) }
    func advance(by seconds: TimeInterval) { offset.withLockedValue { $0 += seconds } }
    var function: @Sendable () -> Date { { self.now } }
}

/// An in-memory accounts service: scripted replies, every call recorded with
/// the injected clock's time.
final class FakeTokenEndpoint: TokenEndpoint, Sendable {
    enum Reply: Sendable {
        /// 200 with `access-N` (N counts grants); `refresh-N` too when `rotate`.
        case grant(expiresIn: Int, rotate: Bool = false)
        case status(Int, json: String, headers: [(String, String)] = [])
        /// No HTTP answer (connect refused, TLS failure).
        case unreachable
    }

    struct Call: Sendable {
        var form: [(String, String)]
        var basicAuth: (user: String, password: String)?
        var at: Date

        func field(_ name: String) -> String? { form.first { $0.0 == name }?.1 }
    }

    struct Unreachable: Error {}

    private struct State {
        var script: [Reply] = []
        var fallback: Reply
        var calls: [Call] = []
        var grants = 0
        var held = false
        var inFlight = 0
        var maxInFlight = 0
    }

    private let state: NIOLockedValueBox<State>
    let clock: TestClock
    let delay: Duration

    init(clock: TestClock, fallback: Reply = .grant(expiresIn: 3600), delay: Duration = .zero) {
        self.clock = clock
        self.delay = delay
        state = NIOLockedValueBox(State(fallback: fallback))
    }

    /// The next replies, in order, before the fallback applies again.
    func script(_ replies: Reply...) { state.withLockedValue { $0.script += replies } }
    func setFallback(_ reply: Reply) { state.withLockedValue { $0.fallback = reply } }
    /// Calls wait (unanswered) while held.
    func hold() { state.withLockedValue { $0.held = true } }
    func release() { state.withLockedValue { $0.held = false } }

    var calls: [Call] { state.withLockedValue { $0.calls } }
    var callCount: Int { state.withLockedValue { $0.calls.count } }
    var maxConcurrentCalls: Int { state.withLockedValue { $0.maxInFlight } }

    func requestToken(form: [(String, String)], basicAuth: (user: String, password: String)?) async throws -> TokenEndpointResponse {
        let now = clock.now
        let reply = state.withLockedValue { state -> Reply in
            state.calls.append(Call(form: form, basicAuth: basicAuth, at: now))
            state.inFlight += 1
            state.maxInFlight = max(state.maxInFlight, state.inFlight)
            return state.script.isEmpty ? state.fallback : state.script.removeFirst()
        }
        defer { state.withLockedValue { $0.inFlight -= 1 } }
        // The fake's latency, not a wait in a test: callers see a slow endpoint.
        if delay > .zero { try await Task.sleep(for: delay) }
        // Unanswered while held; cancellation (an abandoned call) ends the wait by throwing.
        while state.withLockedValue({ $0.held }) { try await Task.sleep(for: .milliseconds(5)) }
        switch reply {
        case .grant(let expiresIn, let rotate):
            let n = state.withLockedValue { state -> Int in
                state.grants += 1
                return state.grants
            }
            let refresh = rotate ? ", \"refresh_token\": \"refresh-\(n)\"" : ""
            return Self.json(200, "{\"access_token\": \"access-\(n)\", \"token_type\": \"Bearer\", \"expires_in\": \(expiresIn)\(refresh)}")
        case .status(let status, let json, let headers):
            var response = Self.json(status, json)
            response.headers += headers
            return response
        case .unreachable:
            throw Unreachable()
        }
    }

    static func json(_ status: Int, _ body: String) -> TokenEndpointResponse {
        TokenEndpointResponse(status: status, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
    }
}

/// Every log line a session writes, rendered with its metadata.
final class LogCapture: Sendable {
    let lines = NIOLockedValueBox<[String]>([])

    var logger: Logger {
        let lines = self.lines
        var logger = Logger(label: "spotify-test") { _ in CapturingHandler(lines: lines) }
        logger.logLevel = .trace
        return logger
    }

    var all: [String] { lines.withLockedValue { $0 } }

    struct CapturingHandler: LogHandler {
        let lines: NIOLockedValueBox<[String]>
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            let rendered = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            lines.withLockedValue { $0.append("\(event.level) \(event.message) \(rendered)") }
        }
    }
}

/// What the session's event hooks reported, in order.
final class EventRecorder: Sendable {
    enum Event: Equatable, Sendable {
        case refreshed(String, TokenRefreshOutcome)
        case tokenExpiry(String, Date)
        case refreshTokenIssued(String, Date)
    }

    let events = NIOLockedValueBox<[Event]>([])
    /// Runs inside `refreshTokenIssued`, to look at the file at that moment.
    let onIssued = NIOLockedValueBox<(@Sendable () -> Void)?>(nil)

    var hooks: TokenSessionEvents {
        let events = self.events
        let onIssued = self.onIssued
        return TokenSessionEvents(
            refreshed: { name, result in events.withLockedValue { $0.append(.refreshed(name, result)) } },
            tokenExpiry: { name, date in events.withLockedValue { $0.append(.tokenExpiry(name, date)) } },
            refreshTokenIssued: { name, date in
                events.withLockedValue { $0.append(.refreshTokenIssued(name, date)) }
                onIssued.withLockedValue { $0 }?()
            })
    }

    var results: [TokenRefreshOutcome] {
        events.withLockedValue { $0.compactMap { if case .refreshed(_, let r) = $0 { return r } else { return nil } } }
    }

    var issued: [Date] {
        events.withLockedValue { $0.compactMap { if case .refreshTokenIssued(_, let d) = $0 { return d } else { return nil } } }
    }
}

func session(_ flow: SpotifySession.Flow = .clientCredentials, secret: SecretSource? = .inline(Secret("s3cret-client-secret")),
             refreshTokenFile: String? = nil, refreshBefore: Duration = .seconds(300)) -> SpotifySession {
    SpotifySession(name: "app", flow: flow, clientID: "client-id-1", clientSecret: secret,
                   refreshTokenFile: refreshTokenFile, refreshBefore: refreshBefore)
}

func fileBytes(_ path: String) -> [UInt8] {
    Array(FileManager.default.contents(atPath: path) ?? Data())
}
