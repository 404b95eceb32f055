import Synchronization

/// What a run serves on its `--http` server besides the operator's page: nodes that take
/// requests of their own (a `whep` sink's `/whep/NODE`) register a route here when they are
/// built, and the server asks here first. It also carries the run's web settings a node needs
/// (the page's token, the address the server is bound to, `--webrtc-udp`, `--webrtc-host`) and
/// objects the run's nodes share (one UDP port for every WebRTC viewer). One per run; any thread.
public final class WebEndpoints: Sendable {
    public struct Request: Sendable {
        public var method: String
        public var path: String
        /// The query's fields (`_HLS_msn=3` is "_HLS_msn": "3").
        public var query: [String: String]
        /// Names lower-cased.
        public var headers: [String: String]
        public var body: [UInt8]
        public init(method: String, path: String, query: [String: String] = [:], headers: [String: String], body: [UInt8]) {
            (self.method, self.path, self.query, self.headers, self.body) = (method, path, query, headers, body)
        }
        /// `Authorization: Bearer TOKEN`'s token.
        public var bearer: String? {
            guard let value = headers["authorization"], value.lowercased().hasPrefix("bearer ") else { return nil }
            return String(value.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        }
    }

    public struct Response: Sendable {
        public var status: Int
        public var headers: [String: String]
        public var body: [UInt8]
        /// Set for an answer given later (a blocked playlist reload): called once, must not block,
        /// hands the response over whenever it has it. No server thread waits meanwhile.
        public var later: (@Sendable (@escaping @Sendable (Response) -> Void) -> Void)?
        /// Set for a body written in pieces as they come (an LL-HLS part being written): called
        /// once with the writer; `status` and `headers` go first.
        public var pieces: (@Sendable (any WebBodyWriter) -> Void)?
        public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
            (self.status, self.headers, self.body) = (status, headers, body)
        }
        public static func later(_ start: @escaping @Sendable (@escaping @Sendable (Response) -> Void) -> Void) -> Response {
            var r = Response(status: 0)
            r.later = start
            return r
        }
        public static func pieces(_ status: Int, headers: [String: String], _ open: @escaping @Sendable (any WebBodyWriter) -> Void) -> Response {
            var r = Response(status: status, headers: headers)
            r.pieces = open
            return r
        }
        public static func text(_ status: Int, _ text: String, headers: [String: String] = [:]) -> Response {
            Response(status: status, headers: headers.merging(["Content-Type": "text/plain; charset=utf-8"]) { a, _ in a }, body: Array(text.utf8))
        }
    }

    public struct Settings: Sendable {
        /// The host the run's `--http` server is bound to (nil: the run serves no HTTP).
        public var httpHost: String?
        public var httpPort = 0
        /// The page's token (what a viewer presents as `Authorization: Bearer`).
        public var token: String?
        /// `--webrtc-udp`: the UDP port for WebRTC media (0: one the system picks).
        public var udpPort = 0
        /// `--webrtc-host`: addresses to advertise (`HOST` or `HOST:PORT`); empty: the `--http` address.
        public var advertise: [String] = []
        public init() {}
    }

    public typealias Handler = @Sendable (Request) -> Response

    private struct State {
        var settings = Settings()
        var routes: [String: Handler] = [:]
        var shared: [String: any AnyObject & Sendable] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    public var settings: Settings { state.withLock { $0.settings } }
    public func configure(_ change: (inout Settings) -> Void) { state.withLock { change(&$0.settings) } }

    /// Requests for `prefix` (`/whep/out`) and below it (`/whep/out/...`) go to `handler`.
    public func route(_ prefix: String, _ handler: @escaping Handler) { state.withLock { $0.routes[prefix] = handler } }
    public func removeRoute(_ prefix: String) { _ = state.withLock { $0.routes.removeValue(forKey: prefix) } }

    /// The registered route's answer, nil when no route takes the path.
    public func answer(_ request: Request) -> Response? {
        let handler = state.withLock { s -> Handler? in
            var path = Substring(request.path)
            while !path.isEmpty {
                if let h = s.routes[String(path)] { return h }
                guard let slash = path.lastIndex(of: "/") else { break }
                path = path[..<slash]
            }
            return nil
        }
        return handler?(request)
    }

    /// The object shared under `key`, made by the first to ask.
    public func shared<T: AnyObject & Sendable>(_ key: String, make: () throws -> T) throws -> T {
        try state.withLock { s in
            if let existing = s.shared[key] as? T { return existing }
            let made = try make()
            s.shared[key] = made
            return made
        }
    }
}

/// Where a body written in pieces goes (the server's connection): every call from any thread,
/// queued in order. `end` finishes the body; `close` abandons the connection.
public protocol WebBodyWriter: AnyObject, Sendable {
    func write(_ bytes: [UInt8])
    func end()
    func close()
    /// False once the peer left, or the body was ended or closed.
    var isOpen: Bool { get }
}
