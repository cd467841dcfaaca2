import NIOHTTP1
import PinproxyHTTP1
import PinproxyPolicy

/// What the app is answered when its HTTP/1.1 request cannot be read: the
/// head path's decoder refused it (`MessageRefusal`), or the head timer
/// counted more head than the limit (`HTTPParserError.headerOverflow`, as
/// NIO's decoder said it). A head over the limits is 431; framing refused
/// as the head is read is worded as the router words the framing it
/// refuses (an HTTP/2 stream's); anything else is 400.
enum UnreadableRequest {
    static func refusal(_ refused: MessageRefusal, limits: PinproxyConfig.Limits) -> ProxyError {
        switch refused {
        case .head(.tooLarge), .head(.tooManyFields):
            return headTooLarge(limit: limits.maxHeaderBytes, orFields: MessageRules.maxHeaderCount)
        case .framing(let framing):
            return ProxyError(.badRequest, host: nil, detail: "ambiguous message framing: \(framing.reason)")
        case .head, .chunked, .afterLastMessage, .unsolicitedResponse, .cutOff:
            return ProxyError(.badRequest, host: nil, detail: "malformed HTTP request: \(refused)")
        }
    }

    static func refusal(_ parser: HTTPParserError, limits: PinproxyConfig.Limits) -> ProxyError {
        parser == .headerOverflow
            ? headTooLarge(limit: limits.maxHeaderBytes)
            : ProxyError(.badRequest, host: nil, detail: "malformed HTTP request: \(parser)")
    }

    /// 431 for a head over `max_header_bytes` (`limit`), or, where the same
    /// refusal covers it, over `orFields` fields: one wording wherever a
    /// head is found too large (the head path, the head timer, the router).
    static func headTooLarge(limit: Int, orFields fields: Int? = nil) -> ProxyError {
        ProxyError(.badRequest, host: nil,
                   detail: "request head larger than max_header_bytes (\(limit) bytes)" + (fields.map { " or with more than \($0) fields" } ?? ""),
                   status: .requestHeaderFieldsTooLarge)
    }
}
