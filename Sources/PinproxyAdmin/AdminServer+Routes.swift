import Foundation
import HTTPTypes
import Hummingbird
import NIOPosix
import PinproxyMetrics
import PinproxyPolicy

/// The endpoints. Each handler reads one snapshot of what it reports, so a
/// reload in the middle of a request never mixes two policy sets.
extension AdminServer {
    /// Each path and the one method it answers; any other method gets 405.
    static let routes: [(path: String, method: HTTPRequest.Method)] = [
        ("/", .get), ("/metrics", .get), ("/healthz", .get), ("/readyz", .get), ("/policies", .get), ("/reload", .post),
    ]
    static let methods: [HTTPRequest.Method] = [.get, .head, .post, .put, .delete, .patch, .options]

    func makeRouter() -> Router<BasicRequestContext> {
        let router = Router()
        // Before the routes: it applies to every route added after it.
        let store = self.store
        router.add(middleware: AdminGuardMiddleware(
            requestGuard: AdminRequestGuard(listenHost: listen.host), configuredHosts: { store.snapshot.config.admin.hosts }))
        router.get("/") { _, _ in statusPageResponse() }
        router.get("/metrics") { _, _ in metricsResponse() }
        router.get("/healthz") { _, _ in JSONResponse.make(.ok, ["status": "ok"]) }
        router.get("/readyz") { _, _ in readyResponse() }
        router.get("/policies") { _, _ in policiesResponse() }
        router.post("/reload") { _, _ in try await reloadResponse() }
        for (path, allowed) in Self.routes {
            for method in Self.methods where method != allowed {
                router.on(RouterPath(path), method: method) { _, _ in
                    JSONResponse.make(.methodNotAllowed, [
                        "error": "method_not_allowed", "detail": "\(path) answers \(allowed.rawValue) only",
                    ], headers: [.allow: allowed.rawValue])
                }
            }
        }
        return router
    }

    func metricsResponse() -> Response {
        // Pins become active and expire with time alone: recompute at each scrape.
        metrics.updatePinExpiry(store.snapshot, now: store.loader.clock())
        return Response(
            status: .ok, headers: [.contentType: PinproxyMetrics.contentType],
            body: ResponseBody(byteBuffer: ByteBuffer(string: metrics.exposition())))
    }

    func readyResponse() -> Response {
        let status = providers.readiness()
        let document = ReadinessDocument(status: status, details: providers.readinessDetails())
        return JSONResponse.make(status.isReady ? .ok : .serviceUnavailable, document)
    }

    func policiesResponse() -> Response {
        let document = PoliciesDocument(
            snapshot: store.snapshot, lastReload: store.lastReload, now: store.loader.clock(),
            horizon: store.loader.horizon, probe: providers.probe, observed: providers.observed())
        return JSONResponse.make(.ok, document)
    }

    /// The status page (docs/contract.md §13): HTML under a CSP that lets nothing load.
    func statusPageResponse() -> Response {
        let model = StatusPageModel(
            snapshot: store.snapshot, lastReload: store.lastReload, now: store.loader.clock(), probe: providers.probe,
            verdicts: providers.verdicts, observed: providers.observed(), sessions: providers.sessions())
        return Response(
            status: .ok,
            headers: [
                .contentType: "text/html; charset=utf-8", .contentSecurityPolicy: StatusPageHTML.contentSecurityPolicy,
                .cacheControl: "no-store", HTTPField.Name("X-Content-Type-Options")!: "nosniff",
                HTTPField.Name("Referrer-Policy")!: "no-referrer",
            ],
            body: ResponseBody(byteBuffer: ByteBuffer(string: StatusPageHTML.render(model))))
    }

    /// Runs the blocking reload on NIO's thread pool: neither an event loop
    /// nor the cooperative pool waits for file I/O and TLS context builds.
    func reloadResponse() async throws -> Response {
        let store = self.store
        let outcome = try await NIOThreadPool.singleton.runIfActive { store.reload(trigger: .admin) }
        let at = store.lastReload?.at ?? store.loader.clock()
        switch outcome {
        case .success(let snapshot, let warnings):
            return JSONResponse.make(.ok, ReloadDocument(
                result: "success", at: at, hosts: snapshot.policies.count, errors: [],
                warnings: warnings.map(DiagnosticDocument.init)))
        case .failure(let errors):
            return JSONResponse.make(.unprocessableContent, ReloadDocument(
                result: "failure", at: at, hosts: store.snapshot.policies.count,
                errors: errors.map(DiagnosticDocument.init), warnings: []))
        }
    }
}

/// JSON bodies, keys in a stable order.
enum JSONResponse {
    static func make(_ status: HTTPResponse.Status, _ value: some Encodable, headers: HTTPFields = [:]) -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var headers = headers
        headers[.contentType] = "application/json"
        let body: Data
        do {
            body = try encoder.encode(value)
        } catch {
            return Response(status: .internalServerError)
        }
        var buffer = ByteBuffer(bytes: body)
        buffer.writeString("\n")
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: buffer))
    }
}
