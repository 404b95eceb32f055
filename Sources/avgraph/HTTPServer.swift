import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The one small HTTP/1.1 server of a run, for `--metrics` and `--http`: one request per
/// connection (`Connection: close`), a thread per connection up to `maxConnections` (a
/// scraper, a page and its event stream are the load; more get 503 at once), a bound on the
/// request's size and a 5 s bound on a client that does not send it. The accept loop waits in
/// poll(2) on the socket and a stop pipe, so `close()` ends it at once, and ends every stream.
final class HTTPServer: @unchecked Sendable {
    struct Request: Sendable {
        var method: String
        var path: String
        var query: [String: String]
        var headers: [String: String]
        var body: [UInt8]
        var peer: String
    }

    enum Response: Sendable {
        case full(status: Int, contentType: String, body: [UInt8], headers: [String: String] = [:])
        /// A response that stays open (Server-Sent Events): `stream` writes until it returns.
        case stream(contentType: String, stream: @Sendable (HTTPStream) -> Void)

        static func text(_ status: Int, _ text: String) -> Response {
            .full(status: status, contentType: "text/plain; charset=utf-8", body: Array(text.utf8))
        }
        static func json(_ status: Int, _ bytes: [UInt8]) -> Response {
            .full(status: status, contentType: "application/json", body: bytes, headers: ["Cache-Control": "no-store"])
        }
    }

    struct Failure: Error, CustomStringConvertible { let description: String }

    static let maxConnections = 32
    static let maxHeader = 16 * 1024
    static let maxBody = 64 * 1024

    /// Where it listens: the port the system chose when asked for port 0.
    private(set) var address: HTTPAddress
    private let fd: Int32
    private let handler: @Sendable (Request) -> Response
    private var stopPipe: [Int32] = [-1, -1]
    private let lock = NSCondition()
    private var open = 0
    private var stopped = false
    private var streams: [ObjectIdentifier: HTTPStream] = [:]
    private let acceptDone = DispatchSemaphore(value: 0)

    init(_ address: HTTPAddress, name: String, handler: @escaping @Sendable (Request) -> Response) throws {
        self.address = address
        self.handler = handler
        fd = socket(address.isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "\(name): socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard Self.bind(fd, address) == 0, listen(fd, 64) == 0, pipe(&stopPipe) == 0 else {
            let why = String(cString: strerror(errno))
            Glibc.close(fd)
            throw Failure(description: "\(name): cannot listen on \(address.authority): \(why)")
        }
        for p in stopPipe { _ = fcntl(p, F_SETFD, FD_CLOEXEC) }
        var bound = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        if withUnsafeMutablePointer(to: &bound, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }) == 0 {
            // sin_port and sin6_port sit at the same offset, right after the family.
            let port = withUnsafeBytes(of: &bound) { $0.load(fromByteOffset: 2, as: UInt16.self) }
            self.address.port = UInt16(bigEndian: port)
        }
        let thread = Thread { [self] in acceptLoop(); acceptDone.signal() }
        thread.name = name
        thread.start()
    }

    private static func bind(_ fd: Int32, _ address: HTTPAddress) -> Int32 {
        if address.isIPv6 {
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_port = address.port.bigEndian
            inet_pton(AF_INET6, address.host, &a.sin6_addr)
            return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = address.port.bigEndian
        inet_pton(AF_INET, address.host, &a.sin_addr)
        return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    }

    /// Stops accepting, ends every open stream and waits for the accept loop.
    func close() {
        lock.lock()
        guard !stopped else { lock.unlock(); return }
        stopped = true
        let open = Array(streams.values)
        lock.unlock()
        for s in open { s.end() }
        var b: UInt8 = 1
        _ = Glibc.write(stopPipe[1], &b, 1)
        acceptDone.wait()
        Glibc.close(fd)
        for p in stopPipe { Glibc.close(p) }
    }

    private func acceptLoop() {
        while true {
            var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: stopPipe[0], events: Int16(POLLIN), revents: 0)]
            if poll(&fds, 2, -1) < 0 { if errno == EINTR { continue } else { return } }
            if fds[1].revents != 0 { return }
            var peer = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &peer) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(fd, $0, &length) } }
            if client < 0 { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            var tv = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            lock.lock()
            let admitted = open < Self.maxConnections && !stopped
            if admitted { open += 1 }
            lock.unlock()
            guard admitted else {
                Self.write(client, Self.head(503, "text/plain; charset=utf-8", length: 9) + Array("too many\n".utf8))
                Glibc.close(client)
                continue
            }
            let name = Self.describe(&peer)
            let t = Thread { [self] in
                serve(client, peer: name)
                Glibc.close(client)
                lock.lock(); open -= 1; lock.unlock()
            }
            t.name = "http-client"
            t.start()
        }
    }

    private func serve(_ client: Int32, peer: String) {
        guard let request = Self.read(client, peer: peer) else {
            Self.write(client, Self.head(400, "text/plain; charset=utf-8", length: 12) + Array("bad request\n".utf8))
            return
        }
        switch handler(request) {
        case .full(let status, let type, let body, let headers):
            Self.write(client, Self.head(status, type, length: body.count, headers: headers) + (request.method == "HEAD" ? [] : body))
        case .stream(let type, let stream):
            // Writes may take their time on a slow reader, but never block the run: the stream
            // is fed from a bounded queue the writer drains.
            var none = timeval(tv_sec: 0, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &none, socklen_t(MemoryLayout<timeval>.size))
            guard Self.write(client, Self.head(200, type, length: nil, headers: ["Cache-Control": "no-store"])) else { return }
            let s = HTTPStream(fd: client)
            lock.lock()
            if stopped { lock.unlock(); return }
            streams[ObjectIdentifier(s)] = s
            lock.unlock()
            stream(s)
            lock.lock(); streams[ObjectIdentifier(s)] = nil; lock.unlock()
        }
    }

    private static func read(_ client: Int32, peer: String) -> Request? {
        var data = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        var headerEnd: Int?
        while headerEnd == nil {
            let n = Glibc.read(client, &chunk, chunk.count)
            if n <= 0 { return nil }
            data += chunk[0..<n]
            headerEnd = data.headerEnd
            if headerEnd == nil && data.count > maxHeader { return nil }
        }
        let head = String(decoding: data[..<headerEnd!], as: UTF8.self).components(separatedBy: "\r\n")
        let line = head[0].split(separator: " ")
        guard line.count == 3, line[2].hasPrefix("HTTP/1.") else { return nil }
        var headers: [String: String] = [:]
        for h in head.dropFirst() {
            guard let colon = h.firstIndex(of: ":") else { continue }
            headers[h[..<colon].lowercased()] = h[h.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body = Array(data[(headerEnd! + 4)...])
        let length = Int(headers["content-length"] ?? "0") ?? -1
        guard (0...maxBody).contains(length) else { return nil }
        while body.count < length {
            let n = Glibc.read(client, &chunk, min(chunk.count, length - body.count))
            if n <= 0 { return nil }
            body += chunk[0..<n]
        }
        let target = line[1].split(separator: "?", maxSplits: 1)
        var query: [String: String] = [:]
        if target.count == 2 {
            for pair in target[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1)
                let key = String(kv[0]).removingPercentEncoding ?? String(kv[0])
                query[key] = kv.count == 2 ? (String(kv[1]).removingPercentEncoding ?? String(kv[1])) : ""
            }
        }
        return Request(method: String(line[0]), path: target.first.map(String.init) ?? "/", query: query,
                       headers: headers, body: body, peer: peer)
    }

    static func head(_ status: Int, _ type: String, length: Int?, headers: [String: String] = [:]) -> [UInt8] {
        let reasons = [200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
                       405: "Method Not Allowed", 413: "Payload Too Large", 503: "Service Unavailable"]
        var text = "HTTP/1.1 \(status) \(reasons[status] ?? "")\r\nContent-Type: \(type)\r\n"
        if let length { text += "Content-Length: \(length)\r\n" }
        for (k, v) in headers.sorted(by: { $0.key < $1.key }) { text += "\(k): \(v)\r\n" }
        text += "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n"
        return Array(text.utf8)
    }

    @discardableResult
    static func write(_ client: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            sent += n
        }
        return true
    }

    private static func describe(_ peer: inout sockaddr_storage) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST)), port = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let r = withUnsafePointer(to: &peer) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, socklen_t(MemoryLayout<sockaddr_storage>.size), &host, socklen_t(host.count), &port, socklen_t(port.count), NI_NUMERICHOST | NI_NUMERICSERV)
            }
        }
        return r == 0 ? "\(String(filledBuffer: host)):\(String(filledBuffer: port))" : "?"
    }
}

private extension Array where Element == UInt8 {
    /// Where the blank line that ends the header starts.
    var headerEnd: Int? {
        guard count >= 4 else { return nil }
        for i in 0...(count - 4) where self[i] == 13 && self[i + 1] == 10 && self[i + 2] == 13 && self[i + 3] == 10 { return i }
        return nil
    }
}

/// An open response a server-sent event stream writes to: lines queued by whoever has them (the
/// run's event thread), bounded so a client that does not read loses old lines, never holds the
/// run; written by the connection's own thread.
final class HTTPStream: @unchecked Sendable {
    static let maxQueued = 512
    private let fd: Int32
    private let condition = NSCondition()
    private var queue: [[UInt8]] = []
    private var ended = false

    init(fd: Int32) { self.fd = fd }

    func enqueue(_ bytes: [UInt8]) {
        condition.lock()
        if queue.count >= Self.maxQueued { queue.removeFirst(queue.count - Self.maxQueued + 1) }
        queue.append(bytes)
        condition.signal()
        condition.unlock()
    }

    func end() {
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
        shutdown(fd, Int32(SHUT_RDWR))
    }

    /// Writes what is queued until the stream ends or the client goes; `heartbeat` seconds of
    /// quiet send a comment, which is how a client that left is noticed.
    func pump(heartbeat: Double = 10) {
        while true {
            condition.lock()
            if queue.isEmpty && !ended { _ = condition.wait(until: Date(timeIntervalSinceNow: heartbeat)) }
            if ended { condition.unlock(); return }
            let batch = queue.isEmpty ? [Array(": keep-alive\n\n".utf8)] : queue
            queue.removeAll()
            condition.unlock()
            for b in batch where !HTTPServer.write(fd, b) { return }
        }
    }
}
