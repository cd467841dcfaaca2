import ArgumentParser
import Foundation
import PinproxyPolicy

/// `pinproxy check`: load and validate everything a `run` would, print every
/// problem with its location, exit 0 when valid and 1 when not (docs/contract.md §2).
struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Validate the configuration and policy files without serving.")

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text
        case json
    }

    @Option(name: .long, help: "The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).")
    var config: String?

    @Option(name: .long, help: "Output format: text or json.")
    var format: Format = .text

    @Option(name: .long, help: "How far ahead to warn about pin expiry: a duration (30d, 720h) or a number of days.",
            transform: { text in
                guard let duration = DurationParsing.horizon(text) else {
                    throw ValidationError("--horizon must be a duration (30d, 720h) or a number of days, not `\(text)`")
                }
                return duration
            })
    var horizon: Duration = PolicyLoader.defaultHorizon

    @Flag(name: .long, help: "Treat warnings as errors (a CI gate for the policy repository).")
    var strict = false

    func run() throws {
        let loader = PolicyLoader(configFile: config, horizon: horizon)
        let result = loader.load()
        let report = CheckReport(diagnostics: result.diagnostics, strict: strict, relativeTo: loader.workingDirectory)
        let output = format == .json ? report.json : report.text
        FileHandle.standardOutput.write(Data(output.utf8))
        if !report.isValid { throw ExitCode(report.exitCode) }
    }
}

/// Keeps the option's transform closure free of module-qualified lookups.
enum DurationParsing {
    static func horizon(_ text: String) -> Duration? { DurationText.parseHorizon(text) }
}
