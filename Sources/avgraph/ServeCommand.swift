import ArgumentParser
import AVGraph
import AVGraphHTTP
import AVGraphNodes
import AVGraphServe
import AVGraphTransport
import Foundation
import Synchronization

struct ServeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Take many publishers (RTMP, RTMPS, SRT) through one door, each recorded by its own run of a template.",
        discussion: """
        The template is a .pipe whose source is {type: publisher}; {key}, {app}, {session} and {start} (UTC YYYYmmdd-HHMMSS)
        stand in its strings for each run (the file sink fills {part}). Each admitted publish starts `avgraph run TEMPLATE
        --name SESSION` (reach it with avgraph ctl SESSION); a publisher that returns with the same key while its run waits
        (the source's idle) continues that run. Who may publish is a choice: --keys-file, --auth or --open.
        SIGTERM/SIGINT: no new publisher; every run finalizes; exit 0 when all have. A second signal goes on to the runs.
        """
    )

    @Argument(help: "The template .pipe (source {type: publisher}).")
    var template: String

    @Option(name: .customLong("listen"), help: ArgumentHelp("Where publishers come: rtmp://HOST:PORT, rtmps://HOST:PORT (with --cert, --key), srt://HOST:PORT, srtla://HOST:PORT (bonded links), whip://HOST:PORT (WebRTC: publishers POST to /whip/KEY), whips://HOST:PORT (the same over HTTPS, with --cert, --key) (repeatable).",
                                                           valueName: "url"))
    var listen: [String] = []

    @Option(name: .customLong("cert"), help: "The rtmps:// and whips:// listeners' certificate (chain), PEM.")
    var certificate: String?

    @Option(name: .customLong("key"), help: "The rtmps:// and whips:// listeners' private key, PEM.")
    var privateKey: String?

    @Option(name: .customLong("webrtc-udp"), help: "The whip:// listener's UDP port for every session's media (default: the HTTP port's number).")
    var webrtcUdp: Int?

    @Option(name: .customLong("webrtc-host"), help: ArgumentHelp("An address (or name) whip:// publishers send media to: a server behind NAT gives its public one (repeatable; default: the listen address, or with 0.0.0.0 127.0.0.1 and this machine's IPv4 addresses).",
                                                                  valueName: "host"))
    var webrtcHosts: [String] = []

    @Option(name: .customLong("keys-file"), help: "Admit the stream keys in FILE (one a line, # comments; read again when it changes).")
    var keysFile: String?

    @Option(name: .long, help: ArgumentHelp("Ask URL before admitting: POST JSON {action, protocol, app, key, peer, query}; a 2xx admits (its {\"set\": {\"NODE.OPTION\": VALUE}} overrides that run), anything else or nothing within 2 s refuses.",
                                            valueName: "url"))
    var auth: String?

    @Flag(name: .long, help: "Admit every publisher (an open door is a choice, not a default).")
    var open = false

    @Option(name: .long, help: ArgumentHelp("POST the events (publish, unpublish, recording, upload, failed) to URL, signed with --hooks-secret.", valueName: "url"))
    var hooks: String?

    @Option(name: .customLong("hooks-secret"), help: "A file holding the secret the hooks are signed with (HMAC-SHA256).")
    var hooksSecret: String?

    @Option(name: .customLong("hooks-queue"), help: "The folder the hooks wait in until delivered (default: .avgraph-hooks beside the template); keep it beside the recordings.")
    var hooksQueue: String?

    @Option(name: .long, help: ArgumentHelp("Serve the list of live sessions, each with its preview and a link to its run's own page, at http://ADDRESS/ (loopback), e.g. 127.0.0.1:8080.",
                                            valueName: "address"))
    var http: String?

    @Option(name: .customLong("set"), help: ArgumentHelp("Override an option of every run: NODE.OPTION=VALUE (repeatable; the placeholders stand in VALUE too; the backend's set wins).",
                                                        valueName: "node.option=value"))
    var sets: [String] = []

    func validate() throws {
        if listen.isEmpty { throw ValidationError("serve needs at least one --listen URL, like --listen rtmp://0.0.0.0:1935") }
        let choices = [keysFile != nil, auth != nil, open].filter { $0 }.count
        if choices == 0 {
            throw ValidationError("serve admits nobody by default: choose --keys-file FILE, --auth URL or --open (an open door is a choice, not a default)")
        }
        if choices > 1 { throw ValidationError("--keys-file, --auth and --open exclude each other: choose one") }
        for (name, value) in [("--auth", auth), ("--hooks", hooks)] {
            if let value, URL(string: value).map({ ["http", "https"].contains($0.scheme ?? "") && $0.host != nil }) != true {
                throw ValidationError("\(name) takes an http:// or https:// URL, got '\(value)'")
            }
        }
        if (hooks == nil) != (hooksSecret == nil) { throw ValidationError("--hooks and --hooks-secret go together: every hook is signed") }
        if hooks == nil && hooksQueue != nil { throw ValidationError("--hooks-queue goes with --hooks") }
        _ = try parseOverrides(sets)
        if let http, HTTPAddress(http)?.isLoopback != true {
            throw ValidationError("--http takes a loopback HOST:PORT like 127.0.0.1:8080 (the pages it links to are loopback pages), got '\(http)'")
        }
    }

    func run() throws {
        signal(SIGPIPE, SIG_IGN)
        let sinkPaths = try checkTemplate()
        var secret: [UInt8] = []
        if let hooksSecret {
            guard let data = FileManager.default.contents(atPath: hooksSecret), !data.isEmpty else {
                Terminal.err("avgraph serve: --hooks-secret \(hooksSecret): cannot read it, or it is empty")
                throw ExitCode(1)
            }
            // A secret written with `echo` ends in a newline the sender did not mean.
            secret = Array(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).utf8)
        }
        let doors: [PublisherDoor]
        let hookQueue: HookQueue?
        do {
            let webrtc = PublisherDoor.WebRtc(udpPort: webrtcUdp, hosts: webrtcHosts)
            doors = try listen.map { try PublisherDoor(url: $0, keysFile: keysFile, certificate: certificate, privateKey: privateKey, webrtc: webrtc) }
            let folder = hooksQueue ?? ((template as NSString).deletingLastPathComponent as NSString).appendingPathComponent(".avgraph-hooks")
            hookQueue = try hooks.flatMap(URL.init(string:)).map { try HookQueue(url: $0, secret: secret, folder: folder) }
        } catch {
            Terminal.err("avgraph serve: \(error)")
            throw ExitCode(1)
        }
        let server = ServeServer(ServeConfiguration(template: template, doors: doors, auth: auth.flatMap(URL.init(string:)), hooks: hookQueue,
                                                    sinkPaths: sinkPaths, pages: http != nil, sets: sets))
        var index: HTTPServer?
        defer { index?.close() }
        if let http, let address = HTTPAddress(http) {
            do { index = try HTTPServer(address, name: "http", service: HTTPService(names: HTTPNames(bound: address), routes: ServeIndex.routes(server))) } catch {
                Terminal.err("avgraph serve: \(error)")
                throw ExitCode(1)
            }
            Terminal.err("avgraph serve: live sessions at http://\(index!.address.authority)/")
        }
        hookQueue?.start()
        server.start()
        for door in doors { Terminal.err("avgraph serve: listening on \(door.url)") }
        let stopper = ServeSignals(server: server)
        stopper.install()
        server.waitUntilDone()
        hookQueue?.finish(within: 10)
    }

    /// The template checked with stand-ins for its placeholders: it must be valid and read a
    /// `publisher` source. Its file sinks' paths (the `recording` hook's before the sink says it).
    private func checkTemplate() throws -> [String: String] {
        guard let text = FileManager.default.contents(atPath: template).flatMap({ String(data: $0, encoding: .utf8) }) else {
            Terminal.err("avgraph serve: cannot read the template \(template)")
            throw ExitCode(1)
        }
        let standIns = Dictionary(uniqueKeysWithValues: TemplatePlaceholders.names.map { ($0, "__avgraph_\($0)__") })
        let filled = TemplatePlaceholders.fill(text, standIns)
        let checked = Checker(registry: makeRegistry(), overrides: try parseOverrides(sets)).check(contents: Data(filled.utf8), path: template)
        var printer = DiagnosticPrinter()
        for d in checked.diagnostics { Terminal.err(printer.render(d, path: template)) }
        guard checked.isValid else {
            Terminal.err("\(template): not served: fix the errors above (avgraph check \(template))")
            throw ExitCode(1)
        }
        guard checked.nodes.contains(where: { $0.type.typeName == PublisherSourceNode.typeName }) else {
            Terminal.err("\(template): not served: its source must be {type: publisher} (the stream serve admits)")
            throw ExitCode(1)
        }
        var paths: [String: String] = [:]
        for node in checked.nodes where node.type.typeName == "file" {
            guard var p = node.options.string("path") else { continue }
            for (name, standIn) in standIns { p = p.replacingOccurrences(of: standIn, with: "{\(name)}") }
            paths[node.name] = p.hasPrefix("/") ? p : checked.baseDirectory + "/" + p
        }
        return paths
    }
}

/// SIGTERM/SIGINT/SIGHUP: the first stops admitting and asks every run to finalize; the next
/// ones go on to the runs (as `run` answers them: the third quits at once).
final class ServeSignals: Sendable {
    let server: ServeServer
    /// Kept so the sources live as long as this.
    private let sources = Mutex<[any DispatchSourceSignal]>([])

    init(server: ServeServer) { self.server = server }

    func install() {
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            signal(sig, SIG_IGN)
            // Made inside the lock: a source is not Sendable, so it is the array's from the start.
            sources.withLock { sources in
                let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                s.setEventHandler { [server, s] in for _ in 0..<max(1, Int(s.data)) { server.stop(signal: sig) } }
                s.resume()
                sources.append(s)
            }
        }
    }
}
