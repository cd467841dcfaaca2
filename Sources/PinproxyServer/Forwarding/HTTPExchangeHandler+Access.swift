import NIOCore
import PinproxyPolicy

/// The exchange's access line, and the traffic series it is counted in.
extension HTTPExchangeHandler {
    func logAccess(_ exchange: Exchange) {
        if exchange.response == .droppedBody {
            services.logger.warning("upstream sent a body with a response that has none; dropped, connection not reused", metadata: [
                "host": "\(exchange.host)", "status": "\(exchange.status ?? 0)", "method": "\(exchange.method.rawValue)",
            ])
            services.instrumentation.upstreamViolation(policy: exchange.policy, kind: .bodyOnBodilessResponse)
        }
        let status = exchange.status ?? 0
        let seconds = Double((NIODeadline.now() - exchange.started).nanoseconds) / 1e9
        services.recordAccess(AccessRecord(
            client: clientAddress, method: exchange.method.rawValue, host: exchange.host.isEmpty ? "-" : exchange.host,
            path: exchange.target, status: status, bytesUp: exchange.bytesUp, bytesDown: exchange.bytesDown,
            seconds: seconds, policy: exchange.policyLabel, pin: exchange.pin,
            upstream: exchange.upstreamAddress, error: exchange.error?.code.rawValue ?? exchange.failure?.text, mode: modeLabel,
            identity: exchange.identity, clientProtocol: clientProtocol, detail: exchange.error?.withheldDetail
        ), to: trafficRecorder(policy: exchange.policy))
    }

    /// The series this exchange is counted in: the session's (shared by its
    /// HTTP/2 streams, each a handler of its own), else this connection's.
    func trafficRecorder(policy: HostPolicy?) -> any TrafficRecorder {
        if let routes = interception?.routes {
            return routes.trafficRecorder(policy: policy) { services.instrumentation.trafficRecorder(policy: $0) }
        }
        if let traffic, traffic.policy === policy { return traffic.recorder }
        let recorder = services.instrumentation.trafficRecorder(policy: policy)
        traffic = (policy, recorder)
        return recorder
    }
}
