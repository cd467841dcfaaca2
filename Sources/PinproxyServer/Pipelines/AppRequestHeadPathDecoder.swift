import NIOCore
import NIOHTTP1
import PinproxyHTTP1NIO

/// The app's HTTP/1.1 leg's decoder: the head path's `HeadPathDecoder`,
/// reading requests as NIO's decoder does (compared on the same bytes by
/// `HeadDifferentialTests` and the `head` fuzz target), and refusing all it
/// refuses and some more (docs/contract.md §10). Each head is handed on as
/// its bytes (`AppRequestHead.bytes`), which the exchange routes and
/// forwards without making NIO's head of them. A type of
/// its own so that NIO runs it specialized (`HeadPathDecoding` says why).
struct AppRequestHeadPathDecoder: HeadPathDecoding {
    var decoder: HeadPathDecoder<AppRequestHead>
}
