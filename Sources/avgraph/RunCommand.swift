import ArgumentParser
import AVGraph
import AVGraphHTTP
import AVGraphServe
import Foundation

struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Check a .pipe file, then run it.",
        discussion: """
        SIGINT/SIGTERM stop cleanly: encoders are flushed and files finalized.
        Exit status: 0 a clean end with media recorded, 1 invalid file or runtime error (naming the node),
        2 usage error, 3 the run ended but no sink got any media (e.g. no producer came).
        """
    )

    enum EventFormat: String, ExpressibleByArgument { case json }

    @Argument(help: "The .pipe file to run.")
    var file: String

    @Option(name: .customLong("set"), help: "Override an option: NODE.OPTION=VALUE (repeatable).")
    var sets: [String] = []

    @Option(name: .customLong("placeholder"), help: ArgumentHelp("Put VALUE for {NAME} in the file (avgraph serve gives its runs key, app, session and start): NAME=VALUE (repeatable).",
                                                                  valueName: "name=value"))
    var placeholders: [String] = []

    @OptionGroup var pluginOptions: PluginOptions

    @OptionGroup var logging: LoggingOptions

    @Option(name: .long, help: "Write events to stdout, one JSON object a line.")
    var events: EventFormat?

    @Option(name: .long, help: "Stop after this much media time (overrides the file's 'duration'), e.g. 10s.")
    var duration: String?

    @Flag(name: .long, help: "Pace sources at wall-clock speed.")
    var realtime = false

    @Flag(name: .long, help: "Run as fast as possible.")
    var offline = false

    @Option(name: .long, help: "Name this run (events, default control socket), instead of the file's 'pipeline': many runs of one .pipe side by side.")
    var name: String?

    @Option(name: .long, help: "Control socket path, instead of the file's 'control' (or the default for the name).")
    var control: String?

    @Option(name: .long, help: "Seconds between stats (status line, stats events, live rates), e.g. 0.5.")
    var statsInterval: Double = 1

    @Option(name: .long, help: ArgumentHelp("Serve Prometheus metrics at http://ADDRESS/metrics, e.g. 127.0.0.1:9464 (loopback only, unless --metrics-allow-remote).",
                                            valueName: "address"))
    var metrics: String?

    @Flag(name: .long, help: "Let --metrics listen on an address other than loopback (anyone who reaches it can read the figures).")
    var metricsAllowRemote = false

    @Option(name: .long, help: ArgumentHelp("Serve the operator's page and its API at http://ADDRESS/, e.g. 127.0.0.1:8090 (loopback only, unless --http-allow-remote); paces the run in realtime unless --offline.",
                                            valueName: "address"))
    var http: String?

    @Flag(name: .long, help: "Let --http listen on an address other than loopback; every request then needs the token.")
    var httpAllowRemote = false

    @Option(name: .long, help: "The token --http asks for (default: $AVGRAPH_HTTP_TOKEN, else a random one, printed once off loopback).")
    var httpToken: String?

    @Option(name: .long, help: ArgumentHelp("Serve --http over TLS (https://) with this certificate (chain) and its private key, PEM files.",
                                            valueName: "cert,key"))
    var httpTls: String?

    @Option(name: .long, help: ArgumentHelp("A name the page is served under besides loopback names and its own address, e.g. studio.lan (repeatable); a request for another name (its Host) gets 421.",
                                            valueName: "name"))
    var httpHost: [String] = []

    // 4096 by default: a run serving LL-HLS holds a blocked playlist reload per HTTP/1.1 viewer, each a
    // connection that cannot be closed for a newcomer, so 2000 viewers and their other requests fit.
    @Option(name: .customLong("http-connections"), help: ArgumentHelp("Connections --http holds open at once (\(Self.httpConnectionsRange.lowerBound)-\(Self.httpConnectionsRange.upperBound), default \(Self.defaultHttpConnections)); past it the one waiting longest for a request is closed for a newcomer, or the newcomer refused.",
                                                                     valueName: "n"))
    var httpConnections: Int?
    static let defaultHttpConnections = 4096
    static let httpConnectionsRange = 4...65536

    @Option(name: .customLong("webrtc-udp"), help: ArgumentHelp("The UDP port for every WebRTC viewer's media (whep sinks); default: one the system picks.",
                                                                valueName: "port"))
    var webrtcUdp: Int?

    @Option(name: .customLong("webrtc-host"), help: ArgumentHelp("An address (or name) WebRTC viewers are told to send to, HOST or HOST:PORT (repeatable): a server behind NAT gives its public one; default: the --http address.",
                                                                 valueName: "host"))
    var webrtcHost: [String] = []

    func validate() throws {
        if let webrtcUdp, !(0...65535).contains(webrtcUdp) { throw ValidationError("--webrtc-udp is a port, 0 to 65535") }
        if realtime && offline { throw ValidationError("--realtime and --offline exclude each other") }
        if let duration, ValueSyntax.duration(duration) == nil {
            throw ValidationError("--duration takes a duration like 10s or 500ms, got '\(duration)'")
        }
        if !(0.05...3600).contains(statsInterval) { throw ValidationError("--stats-interval takes seconds from 0.05 to 3600, got \(statsInterval)") }
        if let metrics {
            guard let a = HTTPAddress(metrics) else {
                throw ValidationError("--metrics takes HOST:PORT like 127.0.0.1:9464 or [::1]:9464, got '\(metrics)'")
            }
            if !a.isLoopback && !metricsAllowRemote {
                throw ValidationError("--metrics \(metrics) is not a loopback address: add --metrics-allow-remote to serve it beyond this machine")
            }
        }
        if let http {
            guard let a = HTTPAddress(http) else {
                throw ValidationError("--http takes HOST:PORT like 127.0.0.1:8090 or [::1]:8090, got '\(http)'")
            }
            if !a.isLoopback && !httpAllowRemote {
                throw ValidationError("--http \(http) is not a loopback address: add --http-allow-remote (every request then needs the token) to serve it beyond this machine")
            }
        }
        if http == nil, httpTls != nil || !httpHost.isEmpty {
            throw ValidationError("--http-tls and --http-host go with --http")
        }
        if http == nil, httpConnections != nil { throw ValidationError("--http-connections goes with --http") }
        if let httpConnections, !Self.httpConnectionsRange.contains(httpConnections) {
            throw ValidationError("--http-connections takes a number of connections from \(Self.httpConnectionsRange.lowerBound) to \(Self.httpConnectionsRange.upperBound), got \(httpConnections)")
        }
        if let httpTls, tlsFiles(httpTls) == nil {
            throw ValidationError("--http-tls takes CERT,KEY: two PEM files, the certificate and its private key, got '\(httpTls)'")
        }
        if let bad = httpHost.first(where: { !HTTPNames.isValidName($0) }) {
            throw ValidationError("--http-host takes a name or an address without port, like studio.lan or 192.168.1.20, got '\(bad)'")
        }
        if let httpToken, httpToken.count < 16 || httpToken.contains(where: { !$0.isLetter && !$0.isNumber && $0 != "-" && $0 != "_" }) {
            throw ValidationError("--http-token takes at least 16 letters, digits, '-' or '_'")
        }
    }

    func run() throws {
        var checker = Checker(registry: try pluginOptions.registry(), overrides: try parseOverrides(sets))
        checker.loadsFilePlugins = true  // running a file means trusting it; its plugins are checked for ownership and mode
        var checked = placeholders.isEmpty ? checker.check(path: file) : try checkTemplate(checker)
        if let duration, let d = ValueSyntax.duration(duration) { checked.settings.duration = d }
        if let name { checked.settings.name = name }
        if let control { checked.settings.control = control }
        var printer = DiagnosticPrinter()
        for d in checked.diagnostics { Terminal.err(printer.render(d, path: file)) }
        guard checked.isValid else {
            Terminal.err("\(file): not run: fix the errors above (avgraph check \(file))")
            throw ExitCode(1)
        }
        let reporter = StderrReporter(settings: try logging.settings(nodes: checked.nodes.map(\.name)), pipeline: checked)
        // Before the run makes any file: a certificate that will not load is a start error.
        let tls = try httpTls.flatMap(tlsFiles).map { files in
            do { return try HTTPTLS.context(certificate: files.certificate, key: files.key) } catch {
                reporter.say(.error, node: nil, "--http-tls: \(error)")
                throw ExitCode(1)
            }
        }
        let log = EventLog(output: events == .json ? .json : .none)
        reporter.attach(log)
        // A page is for watching a run as it happens: with --http a file-fed run is paced too, unless --offline.
        let mode: Bool? = realtime ? true : offline ? false : http != nil ? true : nil
        let run: PipelineRun
        do { run = try PipelineRun(checked, events: log, realtime: mode) } catch {
            let f = error as? PipelineRun.Failure
            log.emit(.error(.init(Redaction.text(f?.message ?? "\(error)"))), node: f?.node)
            log.flush()
            throw ExitCode(1)
        }
        var control: ControlServer?
        do {
            control = try ControlServer(run: run, path: checked.settings.control ?? ControlServer.defaultPath(for: checked.settings.name))
        } catch {
            // A `control:` path the file asks for is not silently dropped (it may name a file that is not a socket).
            if checked.settings.control != nil {
                reporter.say(.error, node: nil, "\(error)")
                throw ExitCode(1)
            }
            reporter.say(.warning, node: nil, "no control socket: \(error)")
        }
        defer { control?.close() }
        run.statsInterval = statsInterval
        var servers: [HTTPServer] = []
        defer { for s in servers { s.close() } }
        var page: String?
        if let metrics, let address = HTTPAddress(metrics) {
            // Off loopback (--metrics-allow-remote) anyone may read the figures, under any name.
            let service = HTTPService(names: address.isLoopback ? HTTPNames(bound: address) : .any) { [run] in OperatorAPI.metricsOnly(run, $0) }
            do { servers.append(try HTTPServer(address, name: "metrics", service: service)) } catch {
                reporter.say(.error, node: nil, "\(error)")
                throw ExitCode(1)
            }
            if Terminal.isTTY && events == nil, let m = servers.last { Terminal.err("metrics: http://\(m.address.authority)/metrics") }
        }
        if let http, let address = HTTPAddress(http) {
            let given = httpToken ?? ProcessInfo.processInfo.environment["AVGRAPH_HTTP_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
            let api = OperatorAPI(run: run, token: given ?? OperatorAPI.newToken(), remote: !address.isLoopback, preview: run.tapPreview(interval: 0.25))
            var limits = HTTPService.Limits()
            limits.connections = httpConnections ?? Self.defaultHttpConnections
            if let warning = DescriptorLimit.raise(toFit: limits.connections + DescriptorLimit.reserve) { reporter.say(.warning, node: nil, warning) }
            let service = HTTPService(names: HTTPNames(bound: address, extra: httpHost), tls: tls, limits: limits) { api.handle($0) }
            let server: HTTPServer
            do { server = try HTTPServer(address, name: "http", service: service) } catch {
                reporter.say(.error, node: nil, "\(error)")
                throw ExitCode(1)
            }
            servers.append(server)
            run.web.configure { [webrtcUdp, webrtcHost] in
                $0.httpHost = address.host == "localhost" ? "127.0.0.1" : address.host
                $0.httpPort = Int(server.address.port)
                $0.token = api.token
                $0.udpPort = webrtcUdp ?? 0
                $0.advertise = webrtcHost
            }
            // Off loopback the page needs its token: a generated one is said once, here, to whoever started the run.
            let suffix = address.isLoopback || given != nil ? "" : "?token=\(api.token)"
            // The first --http-host is the name the operator serves the page under (and its certificate's).
            let authority = httpHost.first.map { ($0.contains(":") && !$0.hasPrefix("[") ? "[\($0)]" : $0) + ":\(server.address.port)" }
            let url = "\(server.scheme)://\(authority ?? server.address.authority)/"
            page = url
            Terminal.err("avgraph: operator page: \(url)\(suffix)")
        }
        // After `start`: a program that started this run (serve's index) reads the socket and the page from here.
        run.onStart = { [path = control?.path, page] in
            if let path { log.emit(.control(.init(socket: path))) }
            if let page { log.emit(.page(.init(url: page))) }
        }
        let stopper = SignalStopper(run: run)
        stopper.install()
        let status = StatusLine(pipeline: checked, enabled: Terminal.isTTY && events == nil)
        log.onEvent { [unowned run] in if case .stats(let s) = $0.kind { status.update(run, s, wall: $0.wall) } }
        var failure: Error?
        do { try run.run() } catch { failure = error }
        log.flush()
        status.finish()
        let code = reporter.finish(failed: failure)
        if code != 0 { throw ExitCode(code) }
    }

    /// The file with its placeholders filled in, checked as if it were the file itself (its
    /// relative paths still relative to its folder).
    private func checkTemplate(_ checker: Checker) throws -> CheckedPipeline {
        var values: [String: String] = [:]
        for p in placeholders {
            guard let eq = p.firstIndex(of: "="), TemplatePlaceholders.names.contains(String(p[..<eq])) else {
                throw ValidationError("--placeholder takes NAME=VALUE with NAME one of \(TemplatePlaceholders.names.joined(separator: ", ")), got '\(p)'")
            }
            values[String(p[..<eq])] = String(p[p.index(after: eq)...])
        }
        guard let text = FileManager.default.contents(atPath: file).flatMap({ String(data: $0, encoding: .utf8) }) else {
            return checker.check(path: file)
        }
        return checker.check(contents: Data(TemplatePlaceholders.fill(text, values).utf8), path: file)
    }

    /// `CERT,KEY` of --http-tls.
    private func tlsFiles(_ text: String) -> (certificate: String, key: String)? {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
        return (parts[0], parts[1])
    }
}
