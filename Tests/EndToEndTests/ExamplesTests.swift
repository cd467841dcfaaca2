import Foundation
import PinproxyTestSupport
import Testing

/// What a user meets in their first hour (issue 8): the client examples work
/// through a real `pinproxy run`, every shipped YAML parses and passes
/// `pinproxy check`, and the Dockerfile, the Kubernetes manifests and the
/// README's container commands agree with each other.
enum Repository {
    static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    static func path(_ relative: String) -> String { root + "/" + relative }

    static func text(_ relative: String) throws -> String {
        try String(contentsOfFile: path(relative), encoding: .utf8)
    }

    /// Every document of a YAML file, as JSON values, read by PyYAML's safe loader.
    static func yamlDocuments(_ file: String) throws -> [Any] {
        let script = "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1]))), default=str))"
        let (status, out, err) = try ChildProcess.runSeparately("python3", ["-c", script, file])
        guard status == 0 else { throw TestSupportError("\(file) does not parse as YAML:\n\(err)") }
        return try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [Any] ?? []
    }

    static func yamlDocument(_ file: String) throws -> [String: Any] {
        try yamlDocuments(file).first as? [String: Any] ?? [:]
    }

    /// The environment for a client example: the caller's, without any proxy or
    /// trust-store variable that would change what the example does.
    static func cleanEnvironment(_ extra: [String: String]) -> [String: String] {
        let drop: Set = ["http_proxy", "https_proxy", "all_proxy", "no_proxy", "requests_ca_bundle", "curl_ca_bundle",
                         "ssl_cert_file", "ssl_cert_dir", "node_extra_ca_certs", "node_use_env_proxy", "java_tool_options"]
        var environment = ProcessInfo.processInfo.environment.filter { !drop.contains($0.key.lowercased()) }
        environment.merge(extra) { $1 }
        return environment
    }

    static func which(_ command: String) -> String? {
        (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
            .map { "\($0)/\(command)" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    static let hasPythonRequests: Bool = {
        (try? ChildProcess.runSeparately("python3", ["-c", "import requests"]).status) == 0
    }()
}

@Suite("Client examples through a real pinproxy", .blockingWaits, .serialized)
struct ClientExamplesTests {
    final class Setup: @unchecked Sendable {
        let dir: TemporaryDirectory
        let upstream: TestUpstream
        let proxy: ProxyHarness
        /// The upstream's root: trusted by pinproxy, not what a client of pinproxy sees.
        let upstreamRoot: String

        init() async throws {
            dir = try TemporaryDirectory("pinproxy-examples")
            let pki = try TestPKI.make(in: dir, names: ["api.example.test"])
            upstream = try await TestUpstream(chainFile: pki.chainFile, keyFile: pki.leafKey)
            upstreamRoot = pki.rootCertificate
            // Pinned like a real policy: the intermediate, with the root as the backup.
            let intermediate = try TestPKI.opensslSPKIPin(pki.intermediateCertificate)
            let root = try TestPKI.opensslSPKIPin(pki.rootCertificate)
            let policies = """
            hosts:
              - match: api.example.test
                action: intercept
                upstream: 127.0.0.1:\(upstream.port)
                tls: { min_version: "1.2", ca_file: \(pki.rootCertificate) }
                pins:
                  mode: enforce
                  spki_sha256:
                    - pin: "\(intermediate)"
                      note: test intermediate
                    - pin: "sha256/\(root)"
                      note: test root, the backup
            """
            proxy = try ProxyHarness(policies: policies, mainConfig: "network:\n  allow: [127.0.0.0/8]\n", directory: dir)
        }

        /// The example's documented interface: three environment variables.
        var environment: [String: String] {
            Repository.cleanEnvironment([
                "PINPROXY": proxy.proxyURL, "PINPROXY_CA": proxy.caFile,
                "API_URL": "https://api.example.test/v1/me",
            ])
        }

        /// Runs an example; checks it printed the upstream's answer and that
        /// pinproxy logged the exchange with a pin match.
        func expectUpstreamAnswer(_ executable: String, _ arguments: [String], requestsBefore: Int,
                                  extraEnvironment: [String: String] = [:]) throws {
            let environment = self.environment.merging(extraEnvironment) { $1 }
            let (status, out, err) = try ChildProcess.runSeparately(executable, arguments, environment: environment, timeout: 120)
            #expect(status == 0, "\(arguments.last ?? executable) exited \(status): \(err)")
            #expect(out.contains("hello from upstream"), "stdout: \(out)\nstderr: \(err)")
            #expect(err.contains("HTTP 200"), "stderr: \(err)")
            let lines = proxy.waitForAccessLog(count: requestsBefore + 1)
            let line = lines.last { ($0["host"] as? String) == "api.example.test" && ($0["path"] as? String) == "/v1/me" }
            #expect(line?["status"] as? Int == 200)
            #expect(line?["pin"] as? String == "match")
        }
    }

    static let setup = Task.blockingSetup { try await Setup() }

    @Test func curl() async throws {
        let s = try await Self.setup.value
        try s.expectUpstreamAnswer("/bin/bash", [Repository.path("examples/clients/curl.sh")], requestsBefore: s.proxy.accessLog.count)
    }

    @Test func pythonRequests() async throws {
        try #require(Repository.hasPythonRequests, "Python's requests module is missing: pip install requests (or apt-get install python3-requests)")
        let s = try await Self.setup.value
        try s.expectUpstreamAnswer("python3", [Repository.path("examples/clients/python-requests.py")], requestsBefore: s.proxy.accessLog.count)
    }

    @Test(.enabled(if: Repository.which("node") != nil, "node is not installed"))
    func node() async throws {
        let s = try await Self.setup.value
        try s.expectUpstreamAnswer("node", [Repository.path("examples/clients/node.js")], requestsBefore: s.proxy.accessLog.count)
    }

    /// Many machines set NODE_EXTRA_CA_CERTS already (a corporate CA): the
    /// example must still trust PINPROXY_CA.
    @Test(.enabled(if: Repository.which("node") != nil, "node is not installed"))
    func nodeWithNodeExtraCACertsAlreadySet() async throws {
        let s = try await Self.setup.value
        let corporate = try s.dir.write("corporate-ca.pem", try String(contentsOfFile: s.upstreamRoot, encoding: .utf8))
        try s.expectUpstreamAnswer("node", [Repository.path("examples/clients/node.js")], requestsBefore: s.proxy.accessLog.count,
                                   extraEnvironment: ["NODE_EXTRA_CA_CERTS": corporate])
    }

    @Test(.enabled(if: Repository.which("java") != nil && Repository.which("keytool") != nil, "java/keytool are not installed"))
    func java() async throws {
        let s = try await Self.setup.value
        try s.expectUpstreamAnswer("/bin/bash", [Repository.path("examples/clients/java.sh")], requestsBefore: s.proxy.accessLog.count)
    }

    @Test(.enabled(if: Repository.which("go") != nil, "go is not installed"))
    func go() async throws {
        let s = try await Self.setup.value
        let scratch = try TemporaryDirectory("pinproxy-go")
        var environment = s.environment
        environment["GOCACHE"] = environment["GOCACHE"] ?? scratch.file("cache")
        let (status, out, err) = try ChildProcess.runSeparately(
            "go", ["run", "."], environment: environment, currentDirectory: Repository.path("examples/clients/go"), timeout: 300)
        #expect(status == 0, "\(err)")
        #expect(out.contains("hello from upstream"), "\(out)\n\(err)")
    }

    /// bench/loadclient (issue 7) proves what `hey` cannot: it fails a
    /// response whose certificate does not chain to the CA it was given, or
    /// whose issuer is not the one named.
    @Test(.enabled(if: Repository.which("go") != nil, "go is not installed"))
    func theBenchmarkClientVerifiesWhatItIsServed() async throws {
        let s = try await Self.setup.value
        let scratch = try TemporaryDirectory("pinproxy-loadclient")
        var environment = Repository.cleanEnvironment(["GOCACHE": scratch.file("cache"), "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"])
        environment["GOPATH"] = scratch.file("gopath")
        let build = try ChildProcess.runSeparately(
            "go", ["build", "-o", scratch.file("loadclient"), "."], environment: environment,
            currentDirectory: Repository.path("bench/loadclient"), timeout: 300)
        try #require(build.status == 0, "\(build.stderr)")
        func load(_ extra: [String]) throws -> [String: Any] {
            let base = ["-mode", "keepalive", "-c", "2", "-max-requests", "10", "-duration", "60s",
                        "-url", "https://api.example.test/v1/me", "-proxy", s.proxy.proxyURL]
            let run = try ChildProcess.runSeparately(scratch.file("loadclient"), base + extra, timeout: 120)
            return try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any] ?? [:]
        }
        let trusted = try load(["-ca", s.proxy.caFile])
        #expect(trusted["requests"] as? Int == 10)
        #expect(trusted["errors"] as? Int == 0, "\(trusted)")
        #expect((trusted["issuer"] as? String)?.hasPrefix("pinproxy interception CA") == true, "\(trusted)")

        let wrongCA = try load(["-ca", s.upstreamRoot])
        #expect(wrongCA["errors"] as? Int == 10, "\(wrongCA)")
        #expect((wrongCA["first_error"] as? String)?.contains("certificate") == true, "\(wrongCA)")

        let wrongIssuer = try load(["-ca", s.proxy.caFile, "-issuer", "bench squid CA"])
        #expect(wrongIssuer["errors"] as? Int == 10, "\(wrongIssuer)")
        #expect((wrongIssuer["first_error"] as? String)?.contains("expected \"bench squid CA\"") == true, "\(wrongIssuer)")
    }

    @Test func aHostWithNoPolicyIsRefusedAndTheExampleSaysWhy() async throws {
        let s = try await Self.setup.value
        var environment = s.environment
        environment["API_URL"] = "https://elsewhere.example.test/"
        let (status, _, err) = try ChildProcess.runSeparately("/bin/bash", [Repository.path("examples/clients/curl.sh")], environment: environment)
        #expect(status != 0)
        #expect(err.contains("403"), "\(err)")
    }
}

@Suite("Shipped YAML and the container and Kubernetes files", .blockingWaits)
struct ShippedFilesTests {
    /// Every YAML file under etc/ and examples/.
    static func yamlFiles() throws -> [String] {
        var found: [String] = []
        for top in ["etc", "examples"] {
            let enumerator = FileManager.default.enumerator(atPath: Repository.path(top))
            while let name = enumerator?.nextObject() as? String {
                if name.hasSuffix(".yaml") || name.hasSuffix(".yml") { found.append("\(top)/\(name)") }
            }
        }
        return found.sorted()
    }

    @Test func everyShippedYAMLFileParses() throws {
        let files = try Self.yamlFiles()
        for required in ["etc/pinproxy.yaml", "examples/container/pinproxy.yaml", "examples/kubernetes/deployment.yaml",
                         "examples/prometheus/alerts.yml"] {
            #expect(files.contains(required), "\(required) is missing")
        }
        for file in files {
            let documents = try Repository.yamlDocuments(Repository.path(file))
            #expect(!documents.isEmpty, "\(file) holds no document")
        }
    }

    @Test func theShippedConfigurationPassesCheckStrict() throws {
        let (status, out, err) = try PinproxyBinary.run(["check", "--strict", "--config", "etc/pinproxy.yaml"], currentDirectory: Repository.root)
        #expect(status == 0, "\(out)\(err)")
    }

    /// The runtime stage's `COPY` lines from the build context, replayed into a
    /// directory that stands for the image's root, then checked as the image would be.
    @Test func theImagesConfigurationPassesCheckStrict() throws {
        let root = try TemporaryDirectory("pinproxy-image")
        let copies = try Dockerfile.load().runtimeCopies
        #expect(copies.contains { $0.destination == "/etc/pinproxy/pinproxy.yaml" })
        #expect(copies.contains { $0.destination.hasPrefix("/etc/pinproxy/policies") })
        for copy in copies {
            let source = Repository.path(copy.source)
            let target = root.path + copy.destination
            var isDirectory: ObjCBool = false
            try #require(FileManager.default.fileExists(atPath: source, isDirectory: &isDirectory), "COPY source \(copy.source) is missing")
            if isDirectory.boolValue {
                try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
                for name in try FileManager.default.contentsOfDirectory(atPath: source) {
                    try FileManager.default.copyItem(atPath: source + "/" + name, toPath: target + "/" + name)
                }
            } else {
                try FileManager.default.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try FileManager.default.copyItem(atPath: source, toPath: target)
            }
        }
        let config = root.path + Dockerfile.configPath
        let (status, out, err) = try PinproxyBinary.run(["check", "--strict", "--config", config], currentDirectory: root.path)
        #expect(status == 0, "\(out)\(err)")
    }

    /// The two ConfigMaps, projected as deployment.yaml projects them, pass check.
    @Test func theKubernetesConfigMapsPassCheckStrict() throws {
        var maps = try Kubernetes.configMaps()
        let deployment = try Kubernetes.deployment()
        let root = try TemporaryDirectory("pinproxy-k8s")
        // A policy file added to the ConfigMap must reach the pods with no edit
        // to the Deployment (issue 28 item 16): lay the files out as the mounts do.
        maps["pinproxy-policies", default: [:]]["added-later.yaml"] = "hosts:\n  - {match: added.example.com, action: deny}\n"
        let container = (Kubernetes.podSpec(deployment)["containers"] as? [[String: Any]])?.first ?? [:]
        var mounted: Set<String> = []
        for mount in container["volumeMounts"] as? [[String: Any]] ?? [] {
            let name = try #require(mount["name"] as? String)
            guard let configMap = Kubernetes.volume(deployment, name)?["configMap"] as? [String: Any] else { continue }
            let path = try #require(mount["mountPath"] as? String)
            let data = try #require(maps[configMap["name"] as? String ?? ""], "no ConfigMap \(configMap["name"] ?? "")")
            #expect(configMap["items"] == nil, "\(name): an items list leaves out every key it does not name")
            if let subPath = mount["subPath"] as? String {
                try root.write(String(path.dropFirst()), try #require(data[subPath], "no key \(subPath)"))
            } else {
                for (key, content) in data { try root.write(String(path.dropFirst()) + "/" + key, content) }
            }
            mounted.insert(path)
        }
        #expect(mounted == ["/etc/pinproxy/pinproxy.yaml", "/etc/pinproxy/policies"])
        let explained = try PinproxyBinary.run(["explain", "added.example.com", "--config", root.file("etc/pinproxy/pinproxy.yaml")],
                                               currentDirectory: root.path)
        #expect(explained.stdout.contains("added-later.yaml"), "the added file is loaded: \(explained.stdout)\(explained.stderr)")
        // Without the (optional) Spotify Secret there is no SPOTIFY_CLIENT_ID: the pods must still start.
        var environment = Repository.cleanEnvironment([:])
        environment["SPOTIFY_CLIENT_ID"] = nil
        let (status, out, err) = try PinproxyBinary.run(
            ["check", "--strict", "--config", root.file("etc/pinproxy/pinproxy.yaml")], currentDirectory: root.path,
            environment: environment)
        #expect(status == 0, "\(out)\(err)")
    }

    /// The Spotify Secret is optional, replicas are spread, the ServiceMonitor
    /// carries the label kube-prometheus-stack selects on, images are tagged
    /// with the release.
    @Test func theKubernetesManifestsAreReadyForARealCluster() throws {
        let deployment = try Kubernetes.deployment()
        let pod = Kubernetes.podSpec(deployment)
        let containers = (pod["containers"] as? [[String: Any]] ?? []) + (pod["initContainers"] as? [[String: Any]] ?? [])
        for container in containers {
            for variable in container["env"] as? [[String: Any]] ?? [] {
                guard let reference = (variable["valueFrom"] as? [String: Any])?["secretKeyRef"] as? [String: Any],
                      reference["name"] as? String == "pinproxy-spotify" else { continue }
                #expect(reference["optional"] as? Bool == true, "\(variable["name"] ?? "")")
            }
        }
        let spotify = try #require(Kubernetes.volume(deployment, "spotify")?["secret"] as? [String: Any])
        #expect(spotify["optional"] as? Bool == true)

        let podLabels = ((deployment["spec"] as? [String: Any])?["template"] as? [String: Any]).flatMap {
            ($0["metadata"] as? [String: Any])?["labels"] as? [String: String]
        } ?? [:]
        let spread = pod["topologySpreadConstraints"] as? [[String: Any]] ?? []
        #expect(Set(spread.compactMap { $0["topologyKey"] as? String }) == ["kubernetes.io/hostname", "topology.kubernetes.io/zone"])
        for constraint in spread {
            let selector = (constraint["labelSelector"] as? [String: Any])?["matchLabels"] as? [String: String] ?? [:]
            #expect(!selector.isEmpty && selector.allSatisfy { podLabels[$0.key] == $0.value })
        }

        let release = try #require(try PinproxyBinary.run(["--version"]).stdout.split(separator: "\n").first?.split(separator: " ").last)
        for container in containers {
            let image = container["image"] as? String ?? ""
            #expect(image.hasSuffix(":\(release)"), "\(image)")
        }
        let kustomization = try Repository.yamlDocument(Repository.path("examples/kubernetes/kustomization.yaml"))
        let images = kustomization["images"] as? [[String: Any]] ?? []
        #expect(!images.isEmpty && images.allSatisfy { "\($0["newTag"] ?? "")" == release })

        let monitor = try Repository.yamlDocument(Repository.path("examples/kubernetes/servicemonitor.yaml"))
        let labels = (monitor["metadata"] as? [String: Any])?["labels"] as? [String: String] ?? [:]
        #expect(labels["release"]?.isEmpty == false)
        #expect(try Repository.text("examples/kubernetes/README.md").contains("release:"))
    }

    @Test func theKubernetesPoliciesCarryTheShippedPins() throws {
        func pins(_ document: [String: Any]) -> [String: [String]] {
            var result: [String: [String]] = [:]
            for host in document["hosts"] as? [[String: Any]] ?? [] {
                let list = (host["pins"] as? [String: Any])?["spki_sha256"] as? [[String: Any]] ?? []
                result[host["match"] as? String ?? ""] = list.compactMap { $0["pin"] as? String }
            }
            return result
        }
        let shipped = pins(try Repository.yamlDocument(Repository.path("etc/policies/spotify.yaml")))
        let root = try TemporaryDirectory("pinproxy-k8s-pins")
        let policy = try #require(try Kubernetes.configMaps()["pinproxy-policies"]?["spotify.yaml"])
        let inCluster = pins(try Repository.yamlDocument(try root.write("spotify.yaml", policy)))
        #expect(!shipped.isEmpty)
        #expect(inCluster == shipped)
    }
}

@Suite("The Dockerfile, the Kubernetes manifests and the README agree", .blockingWaits)
struct ContainerAgreementTests {
    @Test func portsUserPathsAndProbes() throws {
        let docker = try Dockerfile.load()
        #expect(docker.exposed == [8080, 9090])
        #expect(docker.user == "10001:10001" || docker.user == "10001")
        #expect(docker.volumes == [Dockerfile.statePath])
        #expect(docker.command.suffix(3) == ["run", "--config", Dockerfile.configPath])

        // The image's own configuration listens where the image says it does, on every interface.
        let image = try Repository.yamlDocument(Repository.path("examples/container/pinproxy.yaml"))
        #expect(image["listen"] as? String == "0.0.0.0:8080")
        #expect((image["admin"] as? [String: Any])?["listen"] as? String == "0.0.0.0:9090")
        let imageCA = image["ca"] as? [String: String] ?? [:]
        #expect(imageCA.values.allSatisfy { $0.hasPrefix(Dockerfile.statePath + "/") } && imageCA.count == 2)
        let imageClients = (image["clients"] as? [String: Any])?["allow"] as? [String] ?? []
        #expect(!imageClients.isEmpty && !imageClients.contains("0.0.0.0/0") && !imageClients.contains("::/0"))

        // Kubernetes: the same user, ports, config path, state path and probe endpoints.
        let deployment = try Kubernetes.deployment()
        let pod = try #require(((deployment["spec"] as? [String: Any])?["template"] as? [String: Any])?["spec"] as? [String: Any])
        let podSecurity = pod["securityContext"] as? [String: Any] ?? [:]
        #expect(podSecurity["runAsUser"] as? Int == 10001)
        #expect(podSecurity["runAsNonRoot"] as? Bool == true)
        let container = try #require((pod["containers"] as? [[String: Any]])?.first)
        #expect(container["args"] as? [String] == Array(docker.command.suffix(3)))
        #expect((container["securityContext"] as? [String: Any])?["readOnlyRootFilesystem"] as? Bool == true)
        let ports = Dictionary(uniqueKeysWithValues: (container["ports"] as? [[String: Any]] ?? []).map {
            ($0["name"] as? String ?? "", $0["containerPort"] as? Int ?? 0)
        })
        #expect(ports == ["proxy": 8080, "admin": 9090])
        func probe(_ name: String) -> (path: String, port: Int)? {
            guard let get = (container[name] as? [String: Any])?["httpGet"] as? [String: Any] else { return nil }
            let port = (get["port"] as? Int) ?? ports[get["port"] as? String ?? ""] ?? 0
            return (get["path"] as? String ?? "", port)
        }
        #expect(probe("livenessProbe")?.path == "/healthz")
        #expect(probe("livenessProbe")?.port == docker.healthcheckPort)
        #expect(probe("readinessProbe")?.path == "/readyz")
        #expect(probe("readinessProbe")?.port == 9090)
        #expect(docker.healthcheck.contains("/healthz"))
        #expect(docker.healthcheckPort == 9090)
        #expect(Kubernetes.mountPath(deployment, volume: "state") == Dockerfile.statePath)
        #expect(Kubernetes.mountPath(deployment, volume: "config") == Dockerfile.configPath)
        #expect(Kubernetes.mountPath(deployment, volume: "policies") == "/etc/pinproxy/policies")
        let resources = container["resources"] as? [String: Any] ?? [:]
        #expect(resources["requests"] != nil && resources["limits"] != nil)

        // The ConfigMap's main file: the same listeners, the CA on the state volume.
        let root = try TemporaryDirectory("pinproxy-k8s-main")
        let main = try Repository.yamlDocument(try root.write("pinproxy.yaml", try #require(try Kubernetes.configMaps()["pinproxy-config"]?["pinproxy.yaml"])))
        #expect(main["listen"] as? String == "0.0.0.0:8080")
        #expect((main["admin"] as? [String: Any])?["listen"] as? String == "0.0.0.0:9090")
        #expect((main["ca"] as? [String: String] ?? [:]).values.allSatisfy { $0.hasPrefix(Dockerfile.statePath + "/") })

        // Services and the ServiceMonitor name the container's ports.
        var servicePorts: [String: [String: Any]] = [:]
        for service in try Repository.yamlDocuments(Repository.path("examples/kubernetes/service.yaml")).compactMap({ $0 as? [String: Any] }) {
            for port in (service["spec"] as? [String: Any])?["ports"] as? [[String: Any]] ?? [] {
                servicePorts[port["name"] as? String ?? ""] = port
            }
        }
        #expect(servicePorts["proxy"]?["port"] as? Int == 8080)
        #expect(servicePorts["admin"]?["port"] as? Int == 9090)
        #expect(servicePorts.values.allSatisfy { ports[$0["targetPort"] as? String ?? ""] != nil })
        let monitor = try Repository.yamlDocument(Repository.path("examples/kubernetes/servicemonitor.yaml"))
        let endpoint = ((monitor["spec"] as? [String: Any])?["endpoints"] as? [[String: Any]])?.first ?? [:]
        #expect(endpoint["port"] as? String == "admin")
        #expect(endpoint["path"] as? String == "/metrics")
    }

    @Test func theREADMEsContainerCommandsMatchTheImage() throws {
        let readme = try Repository.text("README.md")
        let lines = readme.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.contains("docker build -t pinproxy .") })
        let run = try #require(lines.first { $0.contains("docker run") && $0.contains(" -d ") }, "README has no `docker run -d …` line")
        #expect(run.contains(":8080:8080"), "\(run)")
        #expect(run.contains(":9090:9090"), "\(run)")
        #expect(run.contains(":\(Dockerfile.statePath)"), "\(run)")
        // Every --config in a container command names the image's config file.
        for line in lines where line.contains("docker ") && line.contains("--config") {
            #expect(line.contains("--config \(Dockerfile.configPath)"), "\(line)")
        }
        #expect(readme.contains("swift run pinproxy run"))
        #expect(readme.contains("swift test"))
    }

    /// The HEALTHCHECK command itself, pointed at a real admin listener.
    @Test func theHealthcheckCommandPassesAgainstARunningPinproxyAndFailsWithout() throws {
        let docker = try Dockerfile.load()
        let proxy = try ProxyHarness(policies: "hosts: []\n")
        let port = try proxy.adminPort
        let command = docker.healthcheckCommand.map { $0.replacingOccurrences(of: "/9090", with: "/\(port)") }
        let healthy = try ChildProcess.runSeparately(command[0], Array(command.dropFirst()))
        #expect(healthy.status == 0, "\(healthy.stderr)")
        proxy.process.stop()
        let stopped = try ChildProcess.runSeparately(command[0], Array(command.dropFirst()))
        #expect(stopped.status != 0)
    }
}

/// The instructions of the Dockerfile the tests compare.
struct Dockerfile {
    static let configPath = "/etc/pinproxy/pinproxy.yaml"
    static let statePath = "/var/lib/pinproxy"

    struct Copy { var source: String; var destination: String }

    var exposed: [Int] = []
    var user = ""
    var volumes: [String] = []
    var command: [String] = []
    var healthcheck = ""
    var healthcheckCommand: [String] = []
    var runtimeCopies: [Copy] = []
    /// Every RUN instruction of every stage, in order.
    var runs: [String] = []

    var healthcheckPort: Int? {
        guard let range = healthcheck.range(of: "/dev/tcp/127.0.0.1/") else { return nil }
        return Int(healthcheck[range.upperBound...].prefix { $0.isNumber })
    }

    static func load() throws -> Dockerfile {
        var file = Dockerfile()
        // Join continuation lines; drop comments.
        var instructions: [String] = []
        var current = ""
        for raw in try Repository.text("Dockerfile").split(separator: "\n", omittingEmptySubsequences: false) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if current.isEmpty && (line.hasPrefix("#") || line.isEmpty) { continue }
            if line.hasSuffix("\\") {
                current += line.dropLast() + " "
            } else {
                instructions.append(current + line)
                current = ""
            }
        }
        var stages = 0
        for instruction in instructions {
            let keyword = instruction.prefix { !$0.isWhitespace }.uppercased()
            let rest = instruction.dropFirst(keyword.count).trimmingCharacters(in: .whitespaces)
            switch keyword {
            case "FROM": stages += 1; file.runtimeCopies = []
            case "EXPOSE": file.exposed += rest.split(separator: " ").compactMap { Int($0.split(separator: "/")[0]) }
            case "USER": file.user = rest
            case "RUN": file.runs.append(rest)
            case "VOLUME": file.volumes = try jsonArray(rest)
            case "CMD": file.command = try jsonArray(rest)
            case "HEALTHCHECK":
                file.healthcheck = rest
                if let cmd = rest.range(of: "CMD ") { file.healthcheckCommand = try jsonArray(String(rest[cmd.upperBound...])) }
            case "COPY":
                let words = rest.split(separator: " ").map(String.init)
                if words.contains(where: { $0.hasPrefix("--from") }) { continue }
                let paths = words.filter { !$0.hasPrefix("--") }
                guard paths.count == 2 else { throw TestSupportError("COPY with \(paths.count) paths: \(instruction)") }
                file.runtimeCopies.append(Copy(source: paths[0], destination: paths[1].hasSuffix("/") ? String(paths[1].dropLast()) : paths[1]))
            default: break
            }
        }
        guard stages >= 2 else { throw TestSupportError("the Dockerfile should be multi-stage, found \(stages) stage(s)") }
        return file
    }

    private static func jsonArray(_ text: String) throws -> [String] {
        guard let array = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String] else {
            throw TestSupportError("not a JSON array of strings: \(text)")
        }
        return array
    }
}

enum Kubernetes {
    static func deployment() throws -> [String: Any] {
        try Repository.yamlDocument(Repository.path("examples/kubernetes/deployment.yaml"))
    }

    /// ConfigMap name → its data.
    static func configMaps() throws -> [String: [String: String]] {
        var result: [String: [String: String]] = [:]
        for case let map as [String: Any] in try Repository.yamlDocuments(Repository.path("examples/kubernetes/configmap.yaml")) {
            guard map["kind"] as? String == "ConfigMap", let name = (map["metadata"] as? [String: Any])?["name"] as? String else { continue }
            result[name] = map["data"] as? [String: String] ?? [:]
        }
        return result
    }

    static func podSpec(_ deployment: [String: Any]) -> [String: Any] {
        ((deployment["spec"] as? [String: Any])?["template"] as? [String: Any])?["spec"] as? [String: Any] ?? [:]
    }

    static func volume(_ deployment: [String: Any], _ name: String) -> [String: Any]? {
        (podSpec(deployment)["volumes"] as? [[String: Any]])?.first { $0["name"] as? String == name }
    }

    /// Where the main container mounts `volume`.
    static func mountPath(_ deployment: [String: Any], volume: String) -> String? {
        let container = (podSpec(deployment)["containers"] as? [[String: Any]])?.first ?? [:]
        return (container["volumeMounts"] as? [[String: Any]])?.first { $0["name"] as? String == volume }?["mountPath"] as? String
    }
}
