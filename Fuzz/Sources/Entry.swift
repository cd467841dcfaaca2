import Foundation

/// The libFuzzer targets of docs/fuzzing.md, one executable: `scripts/fuzz`
/// names the target in PINPROXY_FUZZ_TARGET.
enum FuzzTarget: String, CaseIterable, Sendable {
    /// Bytes from the app into an intercepted session after the TLS layer (and
    /// on the listener), through the real handlers, with an upstream that answers.
    case request
    /// Bytes from the upstream into the response path of a request.
    case response
    /// The YAML loader and validator: a main file and a policy file.
    case config
    /// The TLS handler fed arbitrary records, as a server and as a client.
    case tls
    /// The head path against NIO's HTTP/1 decoder on the same bytes.
    case head
    /// The head path's writers against NIO's encoders and validators on the same parts.
    case write
    /// An upstream's answer forwarded as its bytes against NIO's decoder, the head edited whole and NIO's encoder.
    case forward
}

let selectedTarget: FuzzTarget = {
    let name = ProcessInfo.processInfo.environment["PINPROXY_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        FileHandle.standardError.write(Data("PINPROXY_FUZZ_TARGET must be one of: \(names) (got \"\(name)\")\n".utf8))
        exit(2)
    }
    return target
}()

/// With PINPROXY_FUZZ_WRITE_SEEDS=DIR, the `tls` target writes its seeds
/// (real handshakes, recorded) to DIR and the process ends.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    if let directory = ProcessInfo.processInfo.environment["PINPROXY_FUZZ_WRITE_SEEDS"] {
        if selectedTarget == .tls { TLSTarget.writeSeeds(to: directory) }
        exit(0)
    }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    switch selectedTarget {
    case .request: RequestTarget.run(input)
    case .response: ResponseTarget.run(input)
    case .config: ConfigTarget.run(input)
    case .tls: TLSTarget.run(input)
    case .head: HeadTarget.run(input)
    case .write: WriteTarget.run(input)
    case .forward: ForwardTarget.run(input)
    }
    return 0
}

// SwiftPM links an executable with its entry point renamed to
// `<module>_main` (so tests can link it), which would leave libFuzzer's own
// `main` unused: this is that entry point, and it hands over to libFuzzer's
// driver.
@_silgen_name("LLVMFuzzerRunDriver")
func llvmFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
) -> CInt

@_cdecl("pinproxy_fuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    var count = argc
    var arguments = argv
    return llvmFuzzerRunDriver(&count, &arguments) { data, size in fuzzOne(data, size) }
}
