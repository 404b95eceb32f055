import CFFmpeg

/// An FFmpeg call that returned an error code, with FFmpeg's own words for it.
public struct AVFailure: Error, CustomStringConvertible, Sendable {
    public let code: Int32
    public let call: String

    public init(_ code: Int32, _ call: String) {
        self.code = code
        self.call = call
    }

    public var isEOF: Bool { code == avg_error_eof() }
    public var isAgain: Bool { code == avg_error_eagain() }

    public var description: String { "\(call): \(AVFailure.message(code))" }

    public static func message(_ code: Int32) -> String {
        var buf = [CChar](repeating: 0, count: 256)
        return buf.withUnsafeMutableBufferPointer { p in
            String(cString: avg_err2str(code, p.baseAddress, 256))
        }
    }

    /// Throws when `code` is negative.
    @discardableResult
    public static func check(_ code: Int32, _ call: @autoclosure () -> String) throws -> Int32 {
        if code < 0 { throw AVFailure(code, call()) }
        return code
    }
}

/// A failure with a plain message (a bad file, a missing codec).
public struct MediaError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
