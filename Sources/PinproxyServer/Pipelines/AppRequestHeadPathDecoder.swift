import NIOCore
import NIOHTTP1
import PinproxyHTTP1NIO

/// The app's HTTP/1.1 leg's decoder: the head path's `HeadPathDecoder`,
/// reading requests into NIO's parts as NIO's decoder does (compared on the
/// same bytes by `HeadDifferentialTests` and the `head` fuzz target), and
/// refusing all it refuses and some more (docs/contract.md §10). A type of
/// its own so that NIO runs it specialized (`HeadPathDecoding` says why).
struct AppRequestHeadPathDecoder: HeadPathDecoding {
    var decoder: HeadPathDecoder<HTTPRequestHead>
}
