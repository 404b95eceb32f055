import AVGraph
import Foundation

/// Sends a finished file to an HTTP server (the `file` sink's `upload`): one request with a
/// `Content-Length` body streamed from disk in 256 kB pieces (never the whole file in memory),
/// retried with backoff (1 s doubling up to 30 s) until `attempts` are used. Any 2xx status is
/// success. `https://` goes through TLS (TLSSession), the server's certificate checked.
struct Upload {
    let target: UploadTarget
    var timeout = 30.0

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Uploads `path`; emits `uploaded` (status, bytes, attempts, seconds) or throws after the
    /// last attempt, naming the upload; the file stays where it is either way.
    func send(_ path: String, _ out: Outlet) throws {
        let started = Date()
        var delay = 1.0
        var lastError = ""
        for attempt in 1...max(1, target.attempts) {
            do {
                let (status, bytes) = try once(path)
                out.event(.uploaded(.init(path: path, url: target.shownURL, status: status, bytes: bytes, attempts: attempt,
                                          seconds: (Date().timeIntervalSince(started) * 1000).rounded() / 1000)))
                return
            } catch {
                lastError = "\(error)"
                out.warning("upload of '\(path)' to \(target.shownURL) failed (attempt \(attempt) of \(target.attempts)): \(error)")
                if attempt < target.attempts {
                    Thread.sleep(forTimeInterval: delay)
                    delay = min(delay * 2, 30)
                }
            }
        }
        throw MediaError("upload of '\(path)' to \(target.shownURL) failed after \(target.attempts) attempt\(target.attempts == 1 ? "" : "s"): \(lastError); the file is kept")
    }

    /// One request: the HTTP status (2xx) and the bytes sent.
    private func once(_ path: String) throws -> (Int, Int) {
        guard let url = URLComponents(string: target.url), let host = url.host else { throw Failure(description: "bad url") }
        let secure = url.scheme?.lowercased() == "https"
        let fileSize = try (FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
        let file = open(path, O_RDONLY)
        guard file >= 0 else { throw Failure(description: "cannot read the file: \(String(cString: strerror(errno)))") }
        defer { close(file) }
        let socket = try HTTPSocket(host: host, port: url.port ?? (secure ? 443 : 80), timeout: timeout)
        if secure { try socket.startTLS(host: host, caFile: self.target.caFile) }
        defer { socket.close() }
        var target = url.percentEncodedPath.isEmpty ? "/" : url.percentEncodedPath
        if let q = url.percentEncodedQuery { target += "?" + q }
        var head = "\(self.target.method) \(target) HTTP/1.1\r\nHost: \(host)\(url.port.map { ":\($0)" } ?? "")\r\n"
        head += "Content-Length: \(fileSize)\r\nConnection: close\r\n"
        if self.target.headers.keys.first(where: { $0.lowercased() == "content-type" }) == nil {
            head += "Content-Type: \(Self.contentType(path))\r\n"
        }
        for (k, v) in self.target.headers.sorted(by: { $0.key < $1.key }) { head += "\(k): \(v)\r\n" }
        head += "\r\n"
        try socket.send(Array(head.utf8))
        let chunk = UnsafeMutableRawPointer.allocate(byteCount: 256 << 10, alignment: 16)
        defer { chunk.deallocate() }
        var sent = 0
        while sent < fileSize {
            let n = read(file, chunk, min(256 << 10, fileSize - sent))
            guard n > 0 else { throw Failure(description: "the file ended early while sending it (\(sent) of \(fileSize) bytes)") }
            try socket.send(UnsafeRawBufferPointer(start: chunk, count: n))
            sent += n
        }
        let status = try socket.readStatus()
        guard (200..<300).contains(status.code) else { throw Failure(description: "the server answered \(status.line)") }
        return (status.code, sent)
    }

    static func contentType(_ path: String) -> String {
        switch (path as NSString).pathExtension.lowercased() {
        case "mp4": return "video/mp4"
        case "mov": return "video/quicktime"
        case "mkv": return "video/x-matroska"
        case "ts": return "video/mp2t"
        case "flv": return "video/x-flv"
        default: return "application/octet-stream"
        }
    }
}

/// A TCP connection for one HTTP request, every wait bounded by `timeout`.
final class HTTPSocket {
    private var fd: Int32 = -1
    private let timeout: Double
    private var tls: TLSSession?

    init(host: String, port: Int, timeout: Double) throws {
        self.timeout = timeout
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let r = getaddrinfo(host, String(port), &hints, &list)
        guard r == 0, let list else { throw Upload.Failure(description: "cannot resolve \(host): \(String(cString: gai_strerror(r)))") }
        defer { freeaddrinfo(list) }
        var reason = "no address"
        var ai: UnsafeMutablePointer<addrinfo>? = list
        while let a = ai {
            let s = socket(a.pointee.ai_family, a.pointee.ai_socktype, a.pointee.ai_protocol)
            if s >= 0 {
                var tv = timeval(tv_sec: Int(timeout), tv_usec: 0)
                setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
                if connect(s, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 {
                    fd = s
                    return
                }
                reason = String(cString: strerror(errno))
                Glibc.close(s)
            }
            ai = a.pointee.ai_next
        }
        throw Upload.Failure(description: "cannot connect to \(host):\(port): \(reason)")
    }

    func startTLS(host: String, caFile: String?) throws { tls = try TLSSession(fd: fd, host: host, caFile: caFile) }

    func send(_ bytes: [UInt8]) throws { try bytes.withUnsafeBytes { try send($0) } }

    func send(_ bytes: UnsafeRawBufferPointer) throws {
        var done = 0
        while done < bytes.count {
            if let tls {
                done += try tls.send(bytes.baseAddress! + done, bytes.count - done)
                continue
            }
            let n = Glibc.send(fd, bytes.baseAddress! + done, bytes.count - done, Int32(MSG_NOSIGNAL))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw Upload.Failure(description: "sending failed: \(String(cString: strerror(errno)))") }
            done += n
        }
    }

    /// The response's status line and code (the rest of the answer is not needed).
    func readStatus() throws -> (code: Int, line: String) {
        var data: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while !data.contains(10) && data.count < 16384 {
            let n = try buf.withUnsafeMutableBytes { b in try tls.map { try $0.recv(b.baseAddress!, b.count) } ?? recv(fd, b.baseAddress, b.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw Upload.Failure(description: n == 0 ? "the server closed the connection without an answer" : "no answer: \(String(cString: strerror(errno)))") }
            data += buf[0..<n]
        }
        let line = String(decoding: data.prefix { $0 != 10 && $0 != 13 }, as: UTF8.self)
        let parts = line.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let code = Int(parts[1]) else {
            throw Upload.Failure(description: "not an HTTP answer: '\(line.prefix(80))'")
        }
        return (code, line)
    }

    func close() {
        tls?.close()
        tls = nil
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }
}
