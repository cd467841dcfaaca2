import ArgumentParser

@main
struct Pinproxy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pinproxy",
        abstract: "A configuration-driven pinning egress proxy.",
        subcommands: [CheckCommand.self, PinCommand.self, CACommand.self])
}
