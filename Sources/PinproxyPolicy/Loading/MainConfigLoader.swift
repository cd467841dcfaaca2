import Foundation
import Logging
import Yams

/// Reads the main file into a `PinproxyConfig`. Keys the file leaves out
/// keep the embedded defaults (resolved against the working directory, since
/// no file named them); keys it writes resolve against its directory.
struct MainConfigLoader {
    let environment: [String: String]
    let workingDirectory: String

    func load(file: String, into bag: DiagnosticBag) -> PinproxyConfig? {
        let absolute = PathResolution.resolve(file, against: workingDirectory)
        var config = PinproxyConfig.defaults(workingDirectory: workingDirectory)
        config.file = absolute
        config.sourceMap = SourceMap(origin: .file(absolute))
        guard let document = YAMLDocument.load(file: absolute, into: bag) else { return nil }
        // An empty file is a valid file of defaults.
        guard let root = document.root else { return config }
        let reader = NodeReader(file: absolute, environment: environment, bag: bag)
        guard let top = MappingReader(root, reader: reader, key: "the main file", schemaPath: "", mapPrefix: "", table: ConfigKeys.main) else {
            return nil
        }
        read(top, into: &config)
        return config
    }

    private func read(_ top: MappingReader, into config: inout PinproxyConfig) {
        let table = ConfigKeys.main
        top.record(into: &config.sourceMap)
        if let v = top.hostPort("listen") { config.listen = v }
        if let admin = top.child("admin", table: table) {
            admin.record(into: &config.sourceMap)
            if let v = admin.hostPort("listen") { config.admin.listen = v }
            if let v = admin.hostNames("hosts") { config.admin.hosts = v }
        }
        if let ca = top.child("ca", table: table) {
            ca.record(into: &config.sourceMap)
            if let v = ca.path("cert") { config.ca.certificatePath = v }
            if let v = ca.path("key") { config.ca.keyPath = v }
            if let v = ca.path("chain") { config.ca.chainPath = v }
        }
        if let transparent = top.child("transparent", table: table) {
            transparent.record(into: &config.sourceMap)
            // Absent `listen` leaves the listener off: an empty block is a mistake, said at its key.
            if let v = transparent.hostPort("listen") {
                // Two listeners on one port would fail at bind; said here with the file's line.
                // Port 0 asks the kernel for a free port each time, so it never collides.
                if v.port != 0 && (v == config.listen || v == config.admin.listen) {
                    let other = v == config.listen ? "listen" : "admin.listen"
                    transparent.reader.bag.error(transparent.valueLocation("listen"),
                        "`transparent.listen` \(v) is also `\(other)`: give the transparent listener a port of its own (e.g. 127.0.0.1:8443)")
                }
                config.transparent = PinproxyConfig.Transparent(listen: v)
            } else if !transparent.has("listen") {
                transparent.reader.bag.error(transparent.location, "transparent needs listen: ADDR:PORT (the address nftables redirects to), or remove the block")
            }
        }
        if let v = top.path("policies") { config.policiesPath = v }
        if let v = top.choice("default_action", PinproxyConfig.DefaultAction.self) { config.defaultAction = v }
        if let v = top.int("concurrency") { config.concurrency = v }
        if let v = top.bool("http2") { config.http2 = v }
        if let clients = top.child("clients", table: table) {
            ClientsConfigReader().read(clients, into: &config)
        }
        if let network = top.child("network", table: table) {
            network.record(into: &config.sourceMap)
            if let v = network.bool("deny_private") { config.network.denyPrivate = v }
            if let v = network.cidrs("allow") { config.network.allow = v }
        }
        if let limits = top.child("limits", table: table) {
            limits.record(into: &config.sourceMap)
            if let v = limits.int("max_client_connections", atLeast: 1) { config.limits.maxClientConnections = v }
            if let v = limits.duration("header_timeout", allowZero: false) { config.limits.headerTimeout = v }
            if let v = limits.duration("idle_timeout", allowZero: false) { config.limits.idleTimeout = v }
            if let v = limits.int("max_header_bytes", atLeast: 1024) { config.limits.maxHeaderBytes = v }
            if let v = limits.duration("shutdown_grace") { config.limits.shutdownGrace = v }
        }
        if let spotify = top.child("spotify", table: table) {
            SpotifyConfigReader().read(spotify, into: &config)
        }
        // After `spotify:`: a credential may not reuse a session's name, and may use its store.
        if let node = top.node("credentials"),
           let credentials = MappingReader(node, reader: top.reader, key: "credentials", schemaPath: "credentials", mapPrefix: "credentials.", known: nil) {
            CredentialsConfigReader().read(credentials, into: &config)
        }
        if let log = top.child("log", table: table) {
            log.record(into: &config.sourceMap)
            if let v = log.choice("level", Logger.Level.self) { config.log.level = v }
            if let v = log.choice("format", PinproxyConfig.LogFormat.self) { config.log.format = v }
        }
    }
}
