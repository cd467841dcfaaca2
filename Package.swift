// swift-tools-version:6.0
import PackageDescription

// The commit `pinproxy --version` reports, from the environment of the build
// (`scripts/build-release` and the Dockerfile set it from git). SwiftPM keys
// its manifest cache on the environment, so a new value is picked up; read
// nothing from .git here, as that would go stale without re-evaluation.
// Only commit-like characters, since it becomes a C string literal.
let buildCommit = String((Context.environment["PINPROXY_COMMIT"] ?? "").filter {
    $0.isLetter || $0.isNumber || "-._+".contains($0)
}.prefix(64))

let package = Package(
    name: "pinproxy",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "pinproxy", targets: ["pinproxy"]),
        .executable(name: "pinproxy-tlsbench", targets: ["pinproxy-tlsbench"]),
        .executable(name: "pinproxy-floor", targets: ["pinproxy-floor"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-http2.git", from: "1.46.0"),
    ],
    targets: [
        // System OpenSSL 3 (Debian's libssl-dev), plus C shims for its function-like macros.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // The build's commit, as a C define (see buildCommit above).
        .target(
            name: "CPinproxyBuildInfo",
            cSettings: buildCommit.isEmpty ? [] : [.define("PINPROXY_COMMIT", to: "\"\(buildCommit)\"")]
        ),
        // OpenSSL contexts, the NIO TLS handler, SPKI hashing, the interception CA and leaf minting,
        // and the crypto and encodings the other modules need (AES-256-GCM, random bytes, SHA-256,
        // Base64) as Swift types: the only module that imports COpenSSL.
        .target(
            name: "PinproxyTLS",
            dependencies: [
                "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                // NIO's `TLSUserEvent`, fired at the handshake for NIO's ALPN handler.
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // HTTP/1 message heads read from their bytes, as spans, and the framing
        // of the body after them: pure, no NIO (the head path of issue 33).
        .target(name: "PinproxyHTTP1"),
        // The head path in NIO's HTTP/1 codec's places: the same parts from
        // MessageReader's reading (HeadPathDecoder), the same bytes and
        // refusals as NIO's encoders and outbound validators (RequestWriter,
        // ResponseWriter).
        .target(
            name: "PinproxyHTTP1NIO",
            dependencies: [
                "PinproxyHTTP1",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // Config model, YAML loading with marks, validation, host matching, pin
        // evaluation (pure, clock injected), compiled snapshots and reload.
        .target(
            name: "PinproxyPolicy",
            dependencies: [
                "PinproxyTLS",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        // Spotify token sessions (docs/contract.md §7): cache, single-flight refresh,
        // backoff, the refresh-token file. No networking: the proxy supplies
        // a `TokenEndpoint` that goes through its own pinned upstream path.
        .target(
            name: "PinproxySpotify",
            dependencies: [
                "PinproxyPolicy",
                "PinproxyTLS",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        // Spotify sessions shared across replicas (docs/contract.md §12): the
        // PostgreSQL store behind PinproxySpotify's `SharedSessionStore`, so
        // the Spotify module itself stays free of PostgreSQL.
        .target(
            name: "PinproxySessionStore",
            dependencies: [
                "PinproxySpotify",
                "PinproxyPolicy",
                "PinproxyTLS",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The listener, CONNECT and absolute-form routing, interception, the
        // upstream connector and pool, refusals, the access log.
        .target(
            name: "PinproxyServer",
            dependencies: [
                "PinproxyTLS",
                "PinproxyPolicy",
                "PinproxyMetrics",
                "PinproxyHTTP1",
                "PinproxyHTTP1NIO",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Every metric of docs/contract.md §6 behind one typed method each, on a
        // swift-prometheus registry of its own (no global bootstrap).
        .target(
            name: "PinproxyMetrics",
            dependencies: [
                "PinproxyPolicy",
                "PinproxyTLS",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        // The admin HTTP API (docs/contract.md §5): Hummingbird kept out of the proxy module.
        .target(
            name: "PinproxyAdmin",
            dependencies: [
                "PinproxyMetrics",
                "PinproxyPolicy",
                "PinproxySpotify",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The command line.
        .executableTarget(
            name: "pinproxy",
            dependencies: [
                "CPinproxyBuildInfo",
                "PinproxyTLS",
                "PinproxyPolicy",
                "PinproxyServer",
                "PinproxyMetrics",
                "PinproxyAdmin",
                "PinproxySpotify",
                "PinproxySessionStore",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // bench/tls.sh: handshakes/s and bulk MB/s through a TLSHandler pair.
        .executableTarget(
            name: "pinproxy-tlsbench",
            dependencies: [
                "PinproxyTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            path: "Benchmarks/TLSBench"
        ),
        // bench/run's "floor": pinproxy's TLS and NIO's HTTP/1 codecs on both
        // legs, forwarding parts and nothing else (what the layers cost alone);
        // for an app that chooses h2, NIO's HTTP/2 on both legs, forwarding frames.
        .executableTarget(
            name: "pinproxy-floor",
            dependencies: [
                "PinproxyTLS",
                "PinproxyHTTP1",
                "PinproxyHTTP1NIO",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Benchmarks/ForwardingFloor"
        ),
        // bench/heads.sh: one HTTP/1 head read by NIO's decoder and by HeadParser.
        .executableTarget(
            name: "pinproxy-headbench",
            dependencies: [
                "PinproxyHTTP1",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Benchmarks/HeadBench"
        ),
        // bench/store.sh: the session store's token-call counts and read latency,
        // driving the real binary, PostgreSQL and the mock accounts of the test support.
        .executableTarget(
            name: "pinproxy-storebench",
            dependencies: [
                "PinproxyTestSupport",
                "PinproxySessionStore",
                "PinproxySpotify",
                "PinproxyPolicy",
                "PinproxyTLS",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/StoreBench"
        ),
        // Helpers shared by the test targets: PKI made with the openssl CLI, child processes, temp dirs.
        .target(
            name: "PinproxyTestSupport",
            dependencies: [
                "PinproxyTLS",
                "PinproxyHTTP1",
                "PinproxyHTTP1NIO",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            path: "Tests/PinproxyTestSupport"
        ),
        .testTarget(
            name: "PinproxyTLSTests",
            dependencies: [
                "PinproxyTLS",
                "PinproxyTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ]
        ),
        // The head parser, and the same inputs through NIO's HTTP/1 decoder;
        // the head path's writers, and the same parts through NIO's encoders.
        .testTarget(
            name: "PinproxyHTTP1Tests",
            dependencies: [
                "PinproxyHTTP1",
                "PinproxyHTTP1NIO",
                "PinproxyTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "PinproxyPolicyTests",
            dependencies: [
                "PinproxyPolicy",
                "PinproxyTLS",
                "PinproxyTestSupport",
                .product(name: "Yams", package: "Yams"),
            ]
        ),
        .testTarget(
            name: "PinproxySpotifyTests",
            dependencies: [
                "PinproxySpotify",
                "PinproxyPolicy",
                "PinproxyTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "PinproxyServerTests",
            dependencies: [
                "PinproxyServer",
                "PinproxyPolicy",
                "PinproxyTestSupport",
                "PinproxyHTTP1NIO",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "PinproxyMetricsTests",
            dependencies: [
                "PinproxyMetrics",
                "PinproxyPolicy",
                "PinproxyTestSupport",
            ]
        ),
        .testTarget(
            name: "PinproxyAdminTests",
            dependencies: [
                "PinproxyAdmin",
                "PinproxyMetrics",
                "PinproxyPolicy",
                "PinproxySpotify",
                "PinproxyTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The session store's cipher, and the store against a real PostgreSQL the tests start.
        .testTarget(
            name: "PinproxySessionStoreTests",
            dependencies: [
                "PinproxySessionStore",
                "PinproxySpotify",
                "PinproxyPolicy",
                "PinproxyTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Drives the built `pinproxy` binary and real clients (curl, openssl).
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "pinproxy",
                "PinproxyTestSupport",
                "PinproxyTLS",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            // The gRPC peer the HTTP/2 tests start with python3, read from the
            // source tree by path: not a resource of the test bundle.
            exclude: ["Scripts"]
        ),
    ]
)

// libFuzzer targets (docs/fuzzing.md), only when `scripts/fuzz` builds them
// (PINPROXY_FUZZ=1, with -sanitize=fuzzer into .build-fuzz): a normal
// `swift build` / `swift test` never sees them. One executable; the
// target it runs is chosen by PINPROXY_FUZZ_TARGET.
if Context.environment["PINPROXY_FUZZ"] == "1" {
    package.targets.append(.executableTarget(
        name: "pinproxy-fuzz",
        dependencies: [
            "PinproxyServer",
            "PinproxyPolicy",
            "PinproxyTLS",
            "PinproxyHTTP1",
            "PinproxyTestSupport",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            .product(name: "NIOHPACK", package: "swift-nio-http2"),
        ],
        path: "Fuzz/Sources"
    ))
}
