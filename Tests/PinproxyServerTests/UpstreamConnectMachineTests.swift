import NIOCore
import PinproxyPolicy
import Testing

@testable import PinproxyServer

/// The connector's decisions alone, with no socket: each failure at each
/// stage ends in exactly one `fail` with its refusal, success in one
/// `succeed`, and anything after that is ignored.
@Suite("Upstream connect machine")
struct UpstreamConnectMachineTests {
    typealias Machine = UpstreamConnectMachine
    static let a = HostPort(host: "a.internal", port: 443)
    static let b = HostPort(host: "b.internal", port: 443)

    static func config(targets: [HostPort] = [a], retries: Int = 0, parent: String? = nil, handshake: Bool = true) -> Machine.Config {
        Machine.Config(host: "api.test", targets: targets, retries: retries, parent: parent, awaitsHandshake: handshake,
                       connectTimeout: .seconds(5), handshakeTimeout: .seconds(7))
    }

    /// The actions as short text, so a table row can name them.
    static func text(_ actions: [Machine.Action]) -> [String] {
        actions.map {
            switch $0 {
            case .dial(let target): return "dial \(target)"
            case .close: return "close"
            case .discardNewChannel: return "discard"
            case .sendParentConnect(let target): return "connect \(target)"
            case .install: return "install"
            case .scheduleTimeout(let stage, let amount): return "timer \(stage) \(amount.seconds)"
            case .succeed: return "succeed"
            case .fail(let error): return "fail \(error.code.rawValue)"
            }
        }
    }

    /// Runs `events` from the start; returns every action, in order.
    static func run(_ config: Machine.Config, _ events: [Machine.Event]) -> (actions: [String], machine: Machine) {
        var machine = Machine(config)
        var actions = text(machine.handle(.start))
        for event in events { actions += text(machine.handle(event)) }
        return (actions, machine)
    }

    static func refusal(_ code: RefusalCode) -> ProxyError { ProxyError(code, host: "api.test", detail: "test") }

    /// Every completion in a run: exactly one is the contract.
    static func completions(_ actions: [String]) -> [String] {
        actions.filter { $0 == "succeed" || $0.hasPrefix("fail ") }
    }

    @Test func aDirectTLSDialSucceedsOnceAfterTheHandshake() {
        let (actions, machine) = Self.run(Self.config(), [.dialled, .installed, .handshakeCompleted])
        #expect(actions == ["dial a.internal:443", "install", "timer handshake 7", "succeed"])
        #expect(machine.isDone)
    }

    @Test func aTunnelThroughTheParentSucceedsWithoutAHandshake() {
        let (actions, _) = Self.run(Self.config(parent: "http://parent:3128", handshake: false), [.dialled, .parentAnswered, .installed])
        #expect(actions == ["dial a.internal:443", "connect a.internal:443", "timer parentConnect 5", "install", "succeed"])
    }

    struct Row: Sendable, CustomStringConvertible {
        var name: String
        var parent: Bool
        var events: [Machine.Event]
        var expected: String
        var description: String { name }
    }

    /// Each failure at each stage, and the refusal it ends in (one table row each).
    static let failures: [Row] = [
        Row(name: "guard refuses the upstream", parent: false, events: [.dialFailed(refusal(.ssrfBlocked))], expected: "fail ssrf_blocked"),
        Row(name: "guard refuses the parent", parent: true, events: [.dialFailed(refusal(.ssrfBlocked))], expected: "fail ssrf_blocked"),
        Row(name: "connection refused", parent: false, events: [.dialFailed(refusal(.connectFailed))], expected: "fail connect_failed"),
        Row(name: "connect timeout", parent: false, events: [.dialFailed(refusal(.upstreamTimeout))], expected: "fail upstream_timeout"),
        Row(name: "parent refuses (407/403)", parent: true, events: [.dialled, .parentFailed(refusal(.connectFailed))], expected: "fail connect_failed"),
        Row(name: "parent closes mid-head", parent: true, events: [.dialled, .parentFailed(refusal(.connectFailed))], expected: "fail connect_failed"),
        Row(name: "parent never answers", parent: true, events: [.dialled, .timedOut(.parentConnect)], expected: "fail upstream_timeout"),
        Row(name: "layers cannot be added", parent: false, events: [.dialled, .installFailed(refusal(.connectFailed))], expected: "fail connect_failed"),
        Row(name: "handshake fails", parent: false, events: [.dialled, .installed, .handshakeFailed(refusal(.tlsHandshake))], expected: "fail tls_handshake"),
        Row(name: "chain not verified", parent: false, events: [.dialled, .installed, .handshakeFailed(refusal(.verifyFailed))], expected: "fail verify_failed"),
        Row(name: "pin mismatch", parent: false, events: [.dialled, .installed, .handshakeFailed(refusal(.pinMismatch))], expected: "fail pin_mismatch"),
        Row(name: "pins expired", parent: true, events: [.dialled, .parentAnswered, .installed, .handshakeFailed(refusal(.pinsExpired))], expected: "fail pins_expired"),
        Row(name: "handshake timeout", parent: false, events: [.dialled, .installed, .timedOut(.handshake)], expected: "fail upstream_timeout"),
        Row(name: "handshake timeout via parent", parent: true, events: [.dialled, .parentAnswered, .installed, .timedOut(.handshake)], expected: "fail upstream_timeout"),
    ]

    @Test(arguments: failures)
    func eachFailureEndsInOneRefusal(_ row: Row) {
        let (parent, events, expected) = (row.parent, row.events, row.expected)
        let (actions, machine) = Self.run(Self.config(parent: parent ? "http://parent:3128" : nil), events)
        #expect(Self.completions(actions) == [expected], "\(row): \(actions)")
        #expect(actions.last == expected, "\(row): the refusal is the last action")
        #expect(machine.isDone, "\(row)")
        // A failed parent leg closes the channel it opened before failing.
        if events.contains(where: { if case .parentFailed = $0 { return true }; if case .timedOut(.parentConnect) = $0 { return true }; return false }) {
            #expect(actions.suffix(2).first == "close", "\(row): \(actions)")
        }
    }

    @Test func lateEventsAfterCompletionAreIgnored() {
        let late: [Machine.Event] = [.dialled, .dialFailed(Self.refusal(.connectFailed)), .parentAnswered, .parentFailed(Self.refusal(.connectFailed)),
                                     .installed, .installFailed(Self.refusal(.connectFailed)), .handshakeCompleted,
                                     .handshakeFailed(Self.refusal(.tlsHandshake)), .timedOut(.parentConnect), .timedOut(.handshake), .start]
        for completion in [[Machine.Event.dialled, .installed, .handshakeCompleted], [.dialled, .installed, .timedOut(.handshake)]] {
            var machine = Machine(Self.config())
            _ = machine.handle(.start)
            for event in completion { _ = machine.handle(event) }
            #expect(machine.isDone)
            for event in late {
                let actions = Self.text(machine.handle(event))
                // A late channel is closed by the driver; nothing else happens.
                #expect(actions.isEmpty || actions == ["discard"], "\(event): \(actions)")
            }
        }
    }

    @Test func aTimerOfAStageAlreadyLeftIsIgnored() {
        // The parent answered; its timer fires during the handshake: no effect.
        let (actions, machine) = Self.run(Self.config(parent: "http://parent:3128"),
                                          [.dialled, .parentAnswered, .installed, .timedOut(.parentConnect)])
        #expect(Self.completions(actions).isEmpty, "\(actions)")
        #expect(!machine.isDone)
        // And a handshake timer during the parent's CONNECT is not the handshake's.
        let (early, _) = Self.run(Self.config(parent: "http://parent:3128"), [.dialled, .timedOut(.handshake)])
        #expect(Self.completions(early).isEmpty, "\(early)")
    }

    @Test func aSecondHandshakeOutcomeIsIgnored() {
        let (actions, _) = Self.run(Self.config(), [.dialled, .installed, .handshakeFailed(Self.refusal(.pinMismatch)),
                                                    .handshakeFailed(Self.refusal(.tlsHandshake)), .handshakeCompleted])
        #expect(Self.completions(actions) == ["fail pin_mismatch"])
    }

    @Test func failedDialsMoveThroughTheTargetsThenTheRoundsAndEndInTheLastError() {
        let (actions, _) = Self.run(Self.config(targets: [Self.a, Self.b], retries: 1), [
            .dialFailed(Self.refusal(.connectFailed)), .dialFailed(Self.refusal(.connectFailed)),
            .dialFailed(Self.refusal(.connectFailed)), .dialFailed(Self.refusal(.upstreamTimeout)),
        ])
        #expect(actions == ["dial a.internal:443", "dial b.internal:443", "dial a.internal:443", "dial b.internal:443", "fail upstream_timeout"])
    }

    @Test func aFailedParentLegIsClosedAndTheNextTargetTried() {
        let (actions, _) = Self.run(Self.config(targets: [Self.a, Self.b], parent: "http://parent:3128"),
                                    [.dialled, .parentFailed(Self.refusal(.connectFailed)), .dialled, .parentAnswered, .installed, .handshakeCompleted])
        #expect(actions == ["dial a.internal:443", "connect a.internal:443", "timer parentConnect 5", "close", "dial b.internal:443",
                            "connect b.internal:443", "timer parentConnect 5", "install", "timer handshake 7", "succeed"])
    }

    @Test func theGuardsRefusalIsFinalEvenWithTargetsAndRoundsLeft() {
        let (actions, _) = Self.run(Self.config(targets: [Self.a, Self.b], retries: 3), [.dialFailed(Self.refusal(.ssrfBlocked))])
        #expect(actions == ["dial a.internal:443", "fail ssrf_blocked"])
    }

    @Test func noTargetIsConnectFailed() {
        let (actions, _) = Self.run(Self.config(targets: []), [])
        #expect(actions == ["fail connect_failed"])
    }

    @Test func aHandshakeTimeoutNamesTheHostAndTheLimit() {
        var machine = Machine(Self.config())
        for event: Machine.Event in [.start, .dialled, .installed] { _ = machine.handle(event) }
        guard case .fail(let error)? = machine.handle(.timedOut(.handshake)).first else { Issue.record("no failure"); return }
        #expect(error.code == .upstreamTimeout)
        #expect(error.detail == "TLS handshake with api.test took longer than 7 s")
    }
}
