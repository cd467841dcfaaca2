import ArgumentParser

@main
struct Pinproxy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pinproxy",
        abstract: "A configuration-driven pinning egress proxy.",
        subcommands: [RunCommand.self, CheckCommand.self, PinCommand.self, CACommand.self])
}
