extension String {
    /// The text of a NUL-terminated buffer a C call filled (`getnameinfo`, `av_log_format_line2`):
    /// up to the first NUL, invalid UTF-8 repaired (Swift 6.2 deprecates `String(cString:)` on arrays).
    public init(filledBuffer chars: [CChar]) {
        self = String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
