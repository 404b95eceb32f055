import CFFmpeg
import Foundation

/// One HTTP(S) request whose body is a file, carried by libavformat's `tcp` or `tls` protocol
/// (connecting, TLS with the server's certificate and name checked, every wait bounded and
/// cancellable): avgraph writes only the request head and reads only the status line.
/// libavformat's `http` protocol cannot be used for this: it sends a streamed body, but in
/// FFmpeg 5.1 a request with a body that is not `post_data` (held in memory) never reads the
/// answer's header, and its chunk parser swallows the status line when the answer is read, so a
/// 503 could not be told from a 201.
public enum HTTPBodyRequest {
    public struct Answer: Sendable {
        public var status: Int
        public var line: String
        public var bytes: Int
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// Sends `path` to `url`; every wait is bounded by `timeout` seconds and cut short by `cancel`.
    public static func send(_ path: String, to url: String, method: String, headers: [(String, String)], caFile: String?,
                            timeout: Double, cancel: CancelFlag) throws -> Answer {
        let size = try (FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0
        guard let file = FileHandle(forReadingAtPath: path) else { throw Failure(description: "cannot read the file") }
        defer { try? file.close() }
        guard let parts = URLComponents(string: url), let host = parts.host, let scheme = parts.scheme?.lowercased(),
              scheme == "http" || scheme == "https" else { throw Failure(description: "bad url") }
        let secure = scheme == "https"
        var options: OpaquePointer?
        defer { av_dict_free(&options) }
        // Microseconds without progress before connecting, a write or a read gives up.
        av_dict_set(&options, "rw_timeout", String(Int64(timeout * 1e6)), 0)
        av_dict_set(&options, "timeout", String(Int64(timeout * 1e6)), 0)
        if secure {
            av_dict_set(&options, "tls_verify", "1", 0)
            if let caFile { av_dict_set(&options, "ca_file", caFile, 0) }
        }
        let port = parts.port ?? (secure ? 443 : 80)
        let bracketed = host.contains(":") ? "[\(host)]" : host
        var target = parts.percentEncodedPath.isEmpty ? "/" : parts.percentEncodedPath
        if let q = parts.percentEncodedQuery { target += "?" + q }
        var head = "\(method) \(target) HTTP/1.1\r\nHost: \(bracketed)\(parts.port.map { ":\($0)" } ?? "")\r\n"
        head += "Content-Length: \(size)\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        var interrupt = AVIOInterruptCB(callback: { opaque in
            guard let opaque else { return 0 }
            return Unmanaged<CancelFlag>.fromOpaque(opaque).takeUnretainedValue().isCancelled ? 1 : 0
        }, opaque: Unmanaged.passUnretained(cancel).toOpaque())
        var io: UnsafeMutablePointer<AVIOContext>?
        let opened = withExtendedLifetime(cancel) { avio_open2(&io, "\(secure ? "tls" : "tcp")://\(bracketed):\(port)", avg_avio_read_write(), &interrupt, &options) }
        guard opened >= 0, let io else { throw Failure(description: reason(opened, cancel)) }
        var closing: UnsafeMutablePointer<AVIOContext>? = io
        defer { withExtendedLifetime(cancel) { _ = avio_closep(&closing) } }
        Array(head.utf8).withUnsafeBufferPointer { avio_write(io, $0.baseAddress, Int32($0.count)) }
        var sent = 0
        while sent < size {
            let piece = file.readData(ofLength: min(256 << 10, size - sent))
            guard !piece.isEmpty else { throw Failure(description: "the file ended early while sending it (\(sent) of \(size) bytes)") }
            piece.withUnsafeBytes { avio_write(io, $0.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32($0.count)) }
            if io.pointee.error < 0 { throw Failure(description: "sending failed: \(reason(io.pointee.error, cancel))") }
            sent += piece.count
        }
        avio_flush(io)
        if io.pointee.error < 0 { throw Failure(description: "sending failed: \(reason(io.pointee.error, cancel))") }
        let (status, line) = try readStatus(io, cancel)
        return Answer(status: status, line: line, bytes: sent)
    }

    /// The answer's status line. Reads larger than the context's buffer go straight to the protocol.
    private static func readStatus(_ io: UnsafeMutablePointer<AVIOContext>, _ cancel: CancelFlag) throws -> (Int, String) {
        var data: [UInt8] = []
        let chunk = max(65536, Int(io.pointee.buffer_size) + 1)
        var buffer = [UInt8](repeating: 0, count: chunk)
        while !data.contains(10) && data.count < 16384 {
            let n = buffer.withUnsafeMutableBufferPointer { avio_read_partial(io, $0.baseAddress, Int32(chunk)) }
            guard n > 0 else {
                throw Failure(description: n == 0 || n == avg_error_eof() ? "the server closed the connection without an answer"
                                                                        : "no answer: \(reason(n, cancel))")
            }
            data += buffer[0..<Int(n)]
        }
        let line = String(decoding: data.prefix { $0 != 10 && $0 != 13 }, as: UTF8.self)
        let parts = line.split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let code = Int(parts[1]) else {
            throw Failure(description: "not an HTTP answer: '\(line.prefix(80))'")
        }
        return (code, line)
    }

    private static func reason(_ code: Int32, _ cancel: CancelFlag) -> String {
        cancel.isCancelled ? "stopped" : AVFailure.message(code)
    }
}
