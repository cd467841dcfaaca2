import NIOHPACK
import NIOHTTP1

/// An app's HTTP/2 request forwarded as its header block: the whole head's
/// fields (`AppRequestBlock.forEachField`) but the hop-by-hop ones and those
/// its `edits` remove, then the fields they add: the edits
/// `MessageRules.upstreamHead` makes to the whole head, in the same order
/// (`ForwardedRequestBlockTests`). An HTTP/2 upstream's stream is sent
/// `upstreamBlock`, where each of the app's fields keeps the indexing it came
/// with, so one the app sent never-indexed goes on never-indexed (RFC 7541
/// §7.1.3); an HTTP/1.1 upstream is sent `whole`. Routed so only without a
/// `Connection` field, which would name more fields to drop
/// (`RequestRouter.routeBlock`).
struct ForwardedRequestBlock: EditedAsListed {
    let app: AppRequestBlock
    var edits = UpstreamFieldEdits()

    init(app: AppRequestBlock) {
        self.app = app
    }

    func contains(name: String) -> Bool {
        if edits.added.contains(name: name) { return true }
        var found = false
        forEachKept { field, _, _ in
            if !found && field.utf8.count == name.utf8.count && field.lowercased() == name.lowercased() { found = true }
        }
        return found
    }

    /// The app's fields that go up, in order.
    private func forEachKept(_ body: (String, String, HPACKIndexing) -> Void) {
        app.forEachField { name, value, indexing in
            var spelt = name
            let kept = spelt.withUTF8 { bytes in
                let name = UnsafeRawBufferPointer(bytes)
                return !MessageRules.isHopByHop(name) && !edits.removes(name)
            }
            if kept { body(name, value, indexing) }
        }
    }

    var whole: HTTPRequestHead {
        var headers = HTTPHeaders()
        headers.reserveCapacity(app.block.count + edits.added.count)
        forEachKept { name, value, _ in headers.add(name: name, value: value) }
        headers.add(contentsOf: edits.added)
        return HTTPRequestHead(version: .http1_1, method: app.method, uri: app.path, headers: headers)
    }

    /// The block an HTTP/2 upstream's stream is sent: the fields
    /// `HTTP2HeaderBlocks.requestBlock` makes of `whole`, in its order
    /// (pseudo-headers, `Host` as `:authority`, the rest lowercased without
    /// those HTTP/2 forbids), made from the block without `whole`. An added
    /// `Connection` field (a policy's header rules may set one) names more to
    /// drop: that head takes the whole way.
    func upstreamBlock(scheme: String) throws -> HPACKHeaders {
        var authority: String?
        var hosts = 0
        forEachKept { name, value, _ in
            if name.utf8.count == 4 && HTTP2HeaderBlocks.lowercased(name) == "host" { hosts += 1; authority = authority ?? value }
        }
        for (name, value) in edits.added where name.utf8.count == 4 && HTTP2HeaderBlocks.lowercased(name) == "host" {
            hosts += 1
            authority = authority ?? value
        }
        guard hosts == 1, let authority else { throw HTTP2HeaderBlocks.Malformed.requestWithoutHost }
        if HTTP2HeaderBlocks.connectionOptions(edits.added) != .none { return try HTTP2HeaderBlocks.requestBlock(whole, scheme: scheme) }
        var block = HPACKHeaders()
        block.reserveCapacity(app.block.count + edits.added.count)
        block.add(name: ":path", value: app.path)
        block.add(name: ":method", value: app.method.rawValue)
        block.add(name: ":scheme", value: scheme)
        block.add(name: ":authority", value: authority)
        forEachKept { name, value, indexing in
            let lower = HTTP2HeaderBlocks.lowercased(name)
            if !HTTP2HeaderBlocks.isDropped(lower, droppingHost: true, options: .none) { block.add(name: lower, value: value, indexing: indexing) }
        }
        for (name, value) in edits.added {
            let lower = HTTP2HeaderBlocks.lowercased(name)
            if !HTTP2HeaderBlocks.isDropped(lower, droppingHost: true, options: .none) { block.add(name: lower, value: value) }
        }
        return block
    }
}
