import ArgumentParser

@main
struct Pinproxy: AsyncParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "pinproxy",
        abstract: "A configuration-driven pinning egress proxy.",
        version: version,
        subcommands: [RunCommand.self, CheckCommand.self, PinCommand.self, CACommand.self, SpotifyCommand.self])
}
