import NIOHTTP1
import PinproxyHTTP1

/// The requests written on an HTTP/1.1 connection whose answers its
/// response decoder has still to be told of, in the order they went out:
/// whether each answer has no body whatever its head says (`HEAD`,
/// `CONNECT`). Told by whoever writes the requests, so that the decoder
/// need not watch every write go past it: NIO runs a write-observing
/// decoder as an outbound handler too, and copied the whole decoder to
/// look at each part written (issue 33). Confined to the connection's
/// event loop.
public final class SentRequests {
    @usableFromInline var answersWithoutBody: [Bool] = []

    public init() {
        answersWithoutBody.reserveCapacity(4)
    }

    /// A request with `method` was written.
    public func sent(_ method: HTTPMethod) {
        answersWithoutBody.append(method == .HEAD || method == .CONNECT)
    }
}

extension HeadPathDecoder where Head: ResponseHeadPathHead {
    /// Tells the reader of the requests `sent` holds, and empties it: called
    /// before each read, so that an answer always finds its request told.
    @inlinable public mutating func take(_ sent: SentRequests) {
        guard !sent.answersWithoutBody.isEmpty else { return }
        for noBody in sent.answersWithoutBody {
            reader.requestSent(expectingNoBody: noBody)
        }
        sent.answersWithoutBody.removeAll(keepingCapacity: true)
    }
}
