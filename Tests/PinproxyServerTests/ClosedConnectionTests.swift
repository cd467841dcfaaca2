import NIOCore
import NIOEmbedded
import NIOHTTP2
import PinproxyHTTP1NIO
import Testing

@testable import PinproxyServer

/// A connection's handlers are freed once they leave its pipeline: taken out
/// by a CONNECT's answer, or removed as the connection closes. Some of them
/// hold the layers they were built with (`PipelineLayers`, which hold them
/// back), so a handler that kept its layers after leaving would keep the
/// whole shape, and a proxy that opened a connection a second would grow by
/// kilobytes a second for as long as it ran.
@Suite("A closed connection keeps nothing")
struct ClosedConnectionTests {
    typealias App = ConnectHandlerTests.App

    /// Closes the app's side as a socket closes: inactive, then the
    /// handlers removed on the loop's next turn.
    static func close(_ proxy: EmbeddedProxy) throws {
        try proxy.channel.close().wait()
        proxy.channel.embeddedEventLoop.run()
    }

    @Test func theListenersHandlersAreFreedWhenTheAppLeavesWithoutARequest() throws {
        let proxy = try EmbeddedProxy()
        weak var connect: ConnectHandler?
        weak var exchange: HTTPExchangeHandler?
        do {
            let sync = proxy.channel.pipeline.syncOperations
            connect = try sync.handler(type: ConnectHandler.self)
            exchange = try sync.handler(type: HTTPExchangeHandler.self)
        }
        #expect(connect != nil && exchange != nil, "the listener's shape has both")
        try Self.close(proxy)
        #expect(connect == nil, "the CONNECT handler outlived its connection")
        #expect(exchange == nil, "the listener's exchange handler outlived its connection")
    }

    @Test func theListenersHandlersAreFreedOnceACONNECTsAnswerTookThemOut() throws {
        let proxy = try EmbeddedProxy()
        weak var connect: ConnectHandler?
        weak var exchange: HTTPExchangeHandler?
        do {
            let sync = proxy.channel.pipeline.syncOperations
            connect = try sync.handler(type: ConnectHandler.self)
            exchange = try sync.handler(type: HTTPExchangeHandler.self)
        }
        try proxy.send("CONNECT intercept.test:443 HTTP/1.1\r\nHost: intercept.test:443\r\n\r\n")
        #expect(try ConnectHandlerTests.connectAnswer(proxy).hasPrefix("HTTP/1.1 200 "))
        proxy.channel.embeddedEventLoop.run()
        #expect(proxy.channel.isActive, "the session goes on: only the listener's layers left")
        #expect(connect == nil, "the CONNECT handler outlived its layers")
        #expect(exchange == nil, "the listener's exchange handler outlived its layers")
    }

    @Test func anInterceptedHTTP1SessionsHandlersAreFreedWhenTheAppLeaves() throws {
        let (proxy, app) = try PipelineBuilderTests.session(offering: nil)
        defer { app.finish() }
        weak var exchange: HTTPExchangeHandler?
        weak var writer: ResponseWriter?
        do {
            let sync = proxy.channel.pipeline.syncOperations
            exchange = try sync.handler(type: HTTPExchangeHandler.self)
            writer = try sync.handler(type: ResponseWriter.self)
        }
        #expect(exchange?.interception?.host == "intercept.test", "the session's own exchange handler")
        try Self.close(proxy)
        #expect(exchange == nil, "the session's exchange handler outlived its connection")
        #expect(writer == nil, "the session's response writer outlived its connection")
    }

    @Test func anInterceptedHTTP2SessionsHandlersAreFreedWhenTheAppLeaves() throws {
        let (proxy, app) = try PipelineBuilderTests.session(offering: ["h2", "http/1.1"])
        defer { app.finish() }
        weak var http2: NIOHTTP2Handler?
        weak var end: HTTP2ConnectionEnd?
        do {
            let sync = proxy.channel.pipeline.syncOperations
            http2 = try sync.handler(type: NIOHTTP2Handler.self)
            end = try sync.handler(type: HTTP2ConnectionEnd.self)
        }
        #expect(http2 != nil && end != nil, "the h2 session's shape has both")
        try Self.close(proxy)
        #expect(http2 == nil, "the session's HTTP/2 handler outlived its connection")
        #expect(end == nil, "the session's connection end outlived its connection")
    }
}
