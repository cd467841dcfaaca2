import HTTPTypes
import Hummingbird
import PinproxyPolicy

/// `AdminRequestGuard` in front of every admin route (docs/contract.md §5):
/// 421 `admin_host_not_allowed` for a `Host` the API does not answer to,
/// 403 `admin_cross_site` for a cross-site state-changing request. The
/// names of `admin.hosts` are read from the snapshot serving now, so a
/// reload applies them.
struct AdminGuardMiddleware: RouterMiddleware {
    typealias Context = BasicRequestContext

    let requestGuard: AdminRequestGuard
    let configuredHosts: @Sendable () -> [String]

    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let verdict = requestGuard.judge(
            host: request.head.authority, origin: request.headers[.origin],
            fetchSite: request.headers[Self.secFetchSite],
            stateChanging: request.method != .get && request.method != .head, configured: configuredHosts())
        switch verdict {
        case .allowed:
            return try await next(request, context)
        case .misdirected(let detail):
            context.logger.notice("admin request refused: Host not allowed", metadata: ["host": "\(request.head.authority ?? "-")"])
            return JSONResponse.make(.misdirectedRequest, ["error": "admin_host_not_allowed", "detail": detail])
        case .forbidden(let detail):
            context.logger.notice("admin request refused: cross-site", metadata: ["path": "\(request.uri.path)"])
            return JSONResponse.make(.forbidden, ["error": "admin_cross_site", "detail": detail])
        }
    }
}
