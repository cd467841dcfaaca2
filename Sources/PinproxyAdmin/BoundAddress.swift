import NIOConcurrencyHelpers
import PinproxyPolicy

/// A one-shot value: the address once bound, or why there will be none.
final class BoundAddress: Sendable {
    private enum State {
        case waiting([CheckedContinuation<HostPort, any Error>])
        case bound(HostPort)
        case failed(any Error)
    }

    private let state = NIOLockedValueBox(State.waiting([]))

    var value: HostPort {
        get async throws {
            try await withCheckedThrowingContinuation { continuation in
                let ready: Result<HostPort, any Error>? = state.withLockedValue { state in
                    switch state {
                    case .waiting(var waiters):
                        waiters.append(continuation)
                        state = .waiting(waiters)
                        return nil
                    case .bound(let address):
                        return .success(address)
                    case .failed(let error):
                        return .failure(error)
                    }
                }
                if let ready { continuation.resume(with: ready) }
            }
        }
    }

    var isBound: Bool {
        state.withLockedValue { if case .bound = $0 { true } else { false } }
    }

    func resolve(_ address: HostPort) { settle(.success(address)) }

    func fail(_ error: any Error) { settle(.failure(error)) }

    /// The first outcome wins; later ones are ignored (a stop after a bind).
    private func settle(_ outcome: Result<HostPort, any Error>) {
        let waiters: [CheckedContinuation<HostPort, any Error>] = state.withLockedValue { state in
            guard case .waiting(let waiters) = state else { return [] }
            switch outcome {
            case .success(let address): state = .bound(address)
            case .failure(let error): state = .failed(error)
            }
            return waiters
        }
        for waiter in waiters { waiter.resume(with: outcome) }
    }
}
