import Foundation
import NIOCore

/// The handlers of a pipeline, head to tail, by type name (generic
/// arguments dropped; NIO's request and response decoders told apart), read
/// from `ChannelPipeline.debugDescription`, NIO's one public walk of a
/// pipeline in order.
enum PipelineShapes {
    static func handlers(_ pipeline: ChannelPipeline) -> [String] {
        pipeline.debugDescription.split(separator: "\n").dropFirst(2).compactMap { line -> String? in
            let sides = line.components(separatedBy: " ↓↑ ")
            guard sides.count == 2 else { return nil }
            let incoming = sides[0].trimmingCharacters(in: .whitespaces)
            var outgoing = sides[1]
            if let bracket = outgoing.range(of: " [", options: .backwards) { outgoing = String(outgoing[..<bracket.lowerBound]) }
            let type = incoming.isEmpty ? outgoing.trimmingCharacters(in: .whitespaces) : incoming
            if type.hasPrefix("ByteToMessageHandler"), type.contains("HeadPathDecoder") {
                return type.contains("Response") ? "HeadPathResponseDecoder" : "HeadPathRequestDecoder"
            }
            if type.hasPrefix("ByteToMessageHandler") {
                // The decoder's first generic argument is what it decodes.
                let request = type.range(of: "HTTPRequestHead")?.lowerBound, response = type.range(of: "HTTPResponseHead")?.lowerBound
                switch (request, response) {
                case let (request?, response?): return request < response ? "RequestDecoder" : "ResponseDecoder"
                case (_?, nil): return "RequestDecoder"
                case (nil, _?): return "ResponseDecoder"
                case (nil, nil): return "ByteToMessageHandler"
                }
            }
            return type.split(separator: "<").first.map(String.init)
        }
    }
}
