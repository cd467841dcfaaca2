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
        ("/probe", .post),
    ]
    static let methods: [HTTPRequest.Method] = [.get, .head, .post, .put, .delete, .patch, .options]

    func makeRouter() -> Router<BasicRequestContext> {
        // HEAD of every GET path: the GET's head without its body (scrapers, `curl -I`).
        let router = Router(options: .autoGenerateHeadEndpoints)
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
        router.post("/probe") { request, _ in await probeResponse(host: request.uri.queryParameters["host"].map(String.init)) }
        for (path, allowed) in Self.routes {
            // HEAD of a GET path is generated (above): only the other methods get 405.
            let answered = allowed == .get ? "GET, HEAD" : allowed.rawValue
            for method in Self.methods where method != allowed && !(allowed == .get && method == .head) {
                router.on(RouterPath(path), method: method) { _, _ in
                    JSONResponse.make(.methodNotAllowed, [
                        "error": "method_not_allowed", "detail": "\(path) answers \(answered) only",
                    ], headers: [.allow: answered])
                }
            }
        }
        return router
    }

    func metricsResponse() -> Response {
        // Pins become active and expire with time alone: recompute at each scrape.
        metrics.updatePinExpiry(store.snapshot, now: store.loader.clock())
        metrics.updateProcess()
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

    /// `POST /probe?host=H` (docs/contract.md §5): one probe now, answered with
    /// its result once it has finished (as `probe` in `/policies`).
    func probeResponse(host: String?) async -> Response {
        guard let host, !host.isEmpty else {
            return JSONResponse.make(.badRequest, ["error": "bad_request", "detail": "name the host to probe: POST /probe?host=HOST"])
        }
        guard let probeNow = providers.probeNow else {
            return JSONResponse.make(.notFound, ["error": "no_probe", "detail": "this admin API cannot run probes"])
        }
        guard let status = await probeNow(host) else {
            return JSONResponse.make(.notFound, [
                "error": "no_policy", "detail": "no intercepted host policy matches \(host); only those are probed",
            ])
        }
        return JSONResponse.make(.ok, ProbeDocument(status))
    }

    /// The status page (docs/contract.md §13): HTML under a CSP that lets nothing load.
    func statusPageResponse() -> Response {
        let model = StatusPageModel(
            snapshot: store.snapshot, lastReload: store.lastReload, now: store.loader.clock(), probe: providers.probe,
            verdicts: providers.verdicts, observed: providers.observed(), sessions: providers.sessions(),
            refusals: providers.refusals)
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
