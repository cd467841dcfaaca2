import ArgumentParser

@main
struct Pinproxy: AsyncParsableCommand {
    static let version = VersionText.release

    static let configuration = CommandConfiguration(
        commandName: "pinproxy",
        abstract: "A configuration-driven pinning egress proxy.",
        version: VersionText.text,
        subcommands: [RunCommand.self, CheckCommand.self, ExplainCommand.self, PinCommand.self, PinsCommand.self, CACommand.self,
                      SpotifyCommand.self, CredentialsCommand.self, PasswdCommand.self])
}
