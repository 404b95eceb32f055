/// An SDP (RFC 8866) as WebRTC writes it (RFC 8829): the session's lines, then each `m=` section
/// with its attributes, kept in order. Parsing is strict where the meaning depends on it (the
/// `m=` line, `a=rtpmap`, the lengths of what is read) and says which line is wrong; attributes
/// it does not know are kept, not refused.
package struct SessionDescription: Equatable, Sendable {
    package struct Attribute: Equatable, Sendable {
        package var name: String
        package var value: String?
    }

    package var sessionAttributes: [Attribute]
    package var media: [MediaDescription]

    /// The most text an offer may be: a browser's is 3-10 kB.
    package static let maxLength = 64 * 1024

    package struct ParseError: Error, Equatable, CustomStringConvertible {
        package var line: Int
        package var reason: String
        package var description: String { "line \(line): \(reason)" }
    }

    package static func parse(_ text: String) throws(ParseError) -> SessionDescription {
        guard text.utf8.count <= maxLength else { throw ParseError(line: 0, reason: "longer than \(maxLength) bytes") }
        var session: [Attribute] = []
        var media: [MediaDescription] = []
        var sawVersion = false
        // "\r\n" is one Character in Swift: split on it as on "\n".
        for (index, line) in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }).enumerated() {
            let number = index + 1
            if line.isEmpty { continue }
            guard line.count >= 2, line.dropFirst().first == "=", let type = line.first else {
                throw ParseError(line: number, reason: "not a `type=value` line")
            }
            let value = String(line.dropFirst(2))
            switch type {
            case "v":
                guard value == "0", !sawVersion else { throw ParseError(line: number, reason: "the version must be `v=0`, once") }
                sawVersion = true
            case "m":
                guard sawVersion else { throw ParseError(line: number, reason: "a media section before `v=0`") }
                guard let m = MediaDescription(mLine: value) else {
                    throw ParseError(line: number, reason: "an `m=` line is `m=KIND PORT PROTO FORMATS`")
                }
                media.append(m)
            case "a":
                let colon = value.firstIndex(of: ":")
                let attribute = Attribute(name: colon.map { String(value[..<$0]) } ?? value, value: colon.map { String(value[value.index(after: $0)...]) })
                if media.isEmpty {
                    session.append(attribute)
                } else {
                    do throws(MediaDescription.AttributeError) { try media[media.count - 1].add(attribute) } catch {
                        throw ParseError(line: number, reason: error.reason)
                    }
                }
            default:
                guard sawVersion || type == "v" else { throw ParseError(line: number, reason: "the description does not begin with `v=0`") }
            }
        }
        guard sawVersion else { throw ParseError(line: 1, reason: "not an SDP: no `v=0`") }
        return SessionDescription(sessionAttributes: session, media: media)
    }

    /// A session-level attribute, or the first media section's (browsers put ICE and DTLS there).
    package func attribute(_ name: String, in m: MediaDescription? = nil) -> String? {
        m?.attribute(name) ?? sessionAttributes.first { $0.name == name }?.value
    }

    /// The `mid`s of `a=group:BUNDLE`.
    package var bundle: [String] {
        guard let group = sessionAttributes.first(where: { $0.name == "group" && $0.value?.hasPrefix("BUNDLE") == true })?.value else { return [] }
        return group.split(separator: " ").dropFirst().map(String.init)
    }
}
