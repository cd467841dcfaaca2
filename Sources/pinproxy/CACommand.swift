import ArgumentParser
import Foundation
import PinproxyPolicy
import PinproxyTLS

/// Where the CA lives: `--ca-cert`/`--ca-key` when given, else the main
/// config's `ca:` paths (`--config`, default etc/pinproxy.yaml, else the
/// embedded defaults under `state/`).
struct CALocation: ParsableArguments {
    @Option(name: .long, help: "The main config file (default: etc/pinproxy.yaml if present, else the embedded defaults).")
    var config: String?

    @Option(name: .customLong("ca-cert"), help: "The CA certificate (overrides the config's ca.cert).")
    var certificateOverride: String?

    @Option(name: .customLong("ca-key"), help: "The CA private key (overrides the config's ca.key).")
    var keyOverride: String?

    @Option(name: .customLong("ca-chain"), help: "The certificates above the CA certificate (overrides the config's ca.chain).")
    var chainOverride: String?

    /// `--ca-chain`, else the config's `ca.chain` (nil: the CA is a root).
    func resolveChain() throws -> String? {
        if let chainOverride { return chainOverride }
        guard let loaded = PolicyLoader(configFile: config).loadMainConfig().0 else { return nil }
        return loaded.ca.chainPath
    }

    /// The two paths, or the config's errors (exit 1) when it cannot be read.
    func resolve() throws -> (certificate: String, key: String) {
        let loader = PolicyLoader(configFile: config)
        let (loaded, diagnostics) = loader.loadMainConfig()
        guard let loaded else {
            diagnostics.errors.forEach { standardError($0.description) }
            throw ExitCode(1)
        }
        return (certificateOverride ?? loaded.ca.certificatePath, keyOverride ?? loaded.ca.keyPath)
    }
}

struct CACommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca",
        abstract: "Create, show and export pinproxy's interception CA.",
        subcommands: [Init.self, Show.self, Export.self, CSR.self])

    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create the interception CA (ECDSA P-256, ten years, key mode 0600) if it does not exist.")
        @OptionGroup var location: CALocation

        func run() throws {
            do {
                let (certificate, key) = try location.resolve()
                let (ca, created) = try CertificateAuthority.loadOrCreate(certificatePath: certificate, keyPath: key)
                if created {
                    print("created \(certificate) and \(key) (mode 0600)")
                } else {
                    print("exists: \(certificate); nothing changed")
                }
                print(Show.describe(ca.certificate), terminator: "")
            } catch let exit as ExitCode {
                throw exit
            } catch {
                standardError("pinproxy ca init: \(PinCommand.reason(error))")
                throw ExitCode(1)
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the CA's subject, issuer, SHA-256 fingerprint, validity and pin, and those of each certificate of its chain (reads only certificates).")
        @OptionGroup var location: CALocation

        func run() throws {
            do {
                // Only certificates: client owners run this to check what they were
                // given (docs/trusting-the-ca.md), and they must not need the key.
                let certificate = try Certificate.loadPEM(file: try location.resolve().certificate)[0]
                print(Self.describe(certificate), terminator: "")
                // An intermediate CA: each certificate above it, up to the root if the file has it.
                for (index, above) in try CertificateAuthority.loadChain(try location.resolveChain(), above: certificate).enumerated() {
                    print("\nchain \(index + 1):\n" + Self.describe(above), terminator: "")
                }
            } catch let exit as ExitCode {
                throw exit
            } catch {
                standardError("pinproxy ca show: \(PinCommand.reason(error))")
                throw ExitCode(1)
            }
        }

        static func describe(_ certificate: Certificate) -> String {
            """
            subject:     \(certificate.subject)
            issuer:      \(certificate.issuer)
            sha256:      \(certificate.fingerprintSHA256)
            not_before:  \(CertificateListing.rfc3339(certificate.notBefore))
            not_after:   \(CertificateListing.rfc3339(certificate.notAfter))
            pin:         sha256/\(certificate.spkiSHA256)

            """
        }
    }

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Write the CA certificate (PEM) for clients to trust.")
        @OptionGroup var location: CALocation

        @Option(name: .long, help: "Write to this file instead of standard output.")
        var out: String?

        func run() throws {
            do {
                // Only the certificate is read: exporting needs no access to the key.
                let certificate = try Certificate.loadPEM(file: try location.resolve().certificate)[0]
                if let out {
                    try SecureFileWriter.write(Array(certificate.pemString.utf8), to: out, mode: 0o644, exclusive: false)
                    standardError("wrote \(out)")
                } else {
                    print(certificate.pemString, terminator: "")
                }
            } catch let exit as ExitCode {
                throw exit
            } catch {
                standardError("pinproxy ca export: \(PinCommand.reason(error))")
                throw ExitCode(1)
            }
        }
    }

    struct CSR: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "csr",
            abstract: "Write a certificate signing request (PEM) for the CA key, for an organisation's CA to sign as an intermediate; creates the key (mode 0600) if there is none.")
        @OptionGroup var location: CALocation

        @Option(name: .customLong("common-name"), help: "The request's CN (default: pinproxy interception CA <8 hex digits of the key>).")
        var commonName: String?

        @Option(name: .long, help: "The request's O.")
        var organization = "pinproxy"

        @Option(name: .long, help: "Write to this file instead of standard output.")
        var out: String?

        func run() throws {
            do {
                let keyPath = try location.resolve().key
                let (key, created) = try CertificateAuthority.loadOrCreateKey(keyPath: keyPath)
                if created { standardError("created \(keyPath) (mode 0600)") }
                let request = try CertificateSigningRequest.pem(
                    key: key, commonName: commonName ?? CertificateAuthority.defaultCommonName(for: key),
                    organization: organization.isEmpty ? nil : organization)
                if let out {
                    try SecureFileWriter.write(Array(request.utf8), to: out, mode: 0o644, exclusive: false)
                    standardError("wrote \(out)")
                } else {
                    print(request, terminator: "")
                }
            } catch let exit as ExitCode {
                throw exit
            } catch {
                standardError("pinproxy ca csr: \(PinCommand.reason(error))")
                throw ExitCode(1)
            }
        }
    }
}
