import Foundation

/// Loads and validates everything a `run` would: the main file, the policy
/// files it names, every cross-check, and every TLS context. `check`, the
/// first start and every reload go through this one function, so they can
/// never disagree about what is valid.
public struct PolicyLoader: Sendable {
    /// The main file as given (`--config`); nil: `etc/pinproxy.yaml` when it
    /// exists, else the embedded defaults.
    public var configFile: String?
    public var environment: [String: String]
    public var workingDirectory: String
    /// How far ahead the pin timeline looks (`check --horizon`).
    public var horizon: Duration
    public var clock: @Sendable () -> Date

    public static let defaultConfigFile = "etc/pinproxy.yaml"
    public static let defaultHorizon = Duration.seconds(30 * 86400)

    public init(
        configFile: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        workingDirectory: String = FileManager.default.currentDirectoryPath,
        horizon: Duration = PolicyLoader.defaultHorizon,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.configFile = configFile
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.horizon = horizon
        self.clock = clock
    }

    /// The main file that will be read (absolute), or nil for the embedded defaults.
    public var resolvedConfigFile: String? {
        if let configFile { return PathResolution.resolve(configFile, against: workingDirectory) }
        let fallback = PathResolution.resolve(Self.defaultConfigFile, against: workingDirectory)
        return FileManager.default.fileExists(atPath: fallback) ? fallback : nil
    }

    /// Only the main file, validated, without the policies: for commands such
    /// as `ca` that need a path from it but must work while a policy is broken.
    public func loadMainConfig() -> (config: PinproxyConfig?, diagnostics: [Diagnostic]) {
        let bag = DiagnosticBag()
        guard let file = resolvedConfigFile else {
            return (PinproxyConfig.defaults(workingDirectory: workingDirectory), [])
        }
        let config = MainConfigLoader(environment: environment, workingDirectory: workingDirectory).load(file: file, into: bag)
        return (bag.all.hasErrors ? nil : config, bag.all.sortedByLocation())
    }

    public func load() -> PolicyLoadResult {
        let bag = DiagnosticBag()
        let now = clock()
        let file = resolvedConfigFile
        var files: [String] = []
        let config: PinproxyConfig?
        if let file {
            files.append(file)
            config = MainConfigLoader(environment: environment, workingDirectory: workingDirectory).load(file: file, into: bag)
        } else {
            config = PinproxyConfig.defaults(workingDirectory: workingDirectory)
        }
        guard let config else {
            return PolicyLoadResult(snapshot: nil, diagnostics: bag.all, files: files)
        }
        MainConfigValidator(config: config).validate(into: bag)
        let policyFiles: [String]
        if config.file == nil && !FileManager.default.fileExists(atPath: config.policiesPath) {
            // No config file and no etc/policies: the embedded defaults run with no
            // policies at all, so default_action (deny) answers every host.
            bag.warning(config.sourceMap["policies"], "no policies: \(config.policiesPath) does not exist, so every host gets default_action \(config.defaultAction.rawValue)")
            policyFiles = []
        } else {
            policyFiles = PolicyFileLoader.files(at: config.policiesPath, location: config.sourceMap["policies"], into: bag) ?? []
        }
        files += policyFiles
        let fileLoader = PolicyFileLoader(environment: environment)
        let specs = policyFiles.flatMap { fileLoader.load(file: $0, into: bag) }
        PolicyValidator(config: config, now: now, horizon: horizon).validate(specs, into: bag)
        let policies = PolicyCompiler(config: config).compile(specs, into: bag)
        let diagnostics = bag.all.sortedByLocation()
        guard !diagnostics.hasErrors else {
            return PolicyLoadResult(snapshot: nil, diagnostics: diagnostics, files: files)
        }
        let snapshot = PolicySnapshot(config: config, policies: policies, warnings: diagnostics.warnings, files: files, loadedAt: now)
        return PolicyLoadResult(snapshot: snapshot, diagnostics: diagnostics, files: files)
    }
}

/// The outcome of one load: a snapshot when there was no error, and every
/// diagnostic either way.
public struct PolicyLoadResult: Sendable {
    /// nil when any error was found.
    public var snapshot: PolicySnapshot?
    public var diagnostics: [Diagnostic]
    /// Every file the load read or tried to read (what the watcher watches).
    public var files: [String]

    public var errors: [Diagnostic] { diagnostics.errors }
    public var warnings: [Diagnostic] { diagnostics.warnings }
}
