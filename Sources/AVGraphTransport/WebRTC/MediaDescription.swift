import Foundation

/// One `m=` section of an SDP: its kind, port, protocol, payload types, and its attributes in
/// order, with the codec facts read from `a=rtpmap` and `a=fmtp` by payload type.
package struct MediaDescription: Equatable, Sendable {
    package var kind: String
    package var port: Int
    package var proto: String
    package var formats: [UInt8]
    package var attributes: [SessionDescription.Attribute] = []
    package var codecs: [UInt8: Codec] = [:]
    package var parameters: [UInt8: [String: String]] = [:]

    package struct Codec: Equatable, Sendable {
        package var name: String
        package var clockRate: Int
        package var channels: Int
    }

    package struct AttributeError: Error { package var reason: String }

    /// `KIND PORT PROTO FORMAT...`: formats are RTP payload types (0-127) for RTP profiles.
    init?(mLine: String) {
        let parts = mLine.split(separator: " ")
        guard parts.count >= 3, let port = Int(parts[1].split(separator: "/").first ?? ""), (0...65535).contains(port) else { return nil }
        kind = String(parts[0])
        self.port = port
        proto = String(parts[2])
        if proto.contains("RTP") {
            var formats: [UInt8] = []
            for f in parts.dropFirst(3) {
                guard let pt = UInt8(f), pt < 128 else { return nil }
                formats.append(pt)
            }
            self.formats = formats
        } else {
            formats = []
        }
    }

    mutating func add(_ a: SessionDescription.Attribute) throws(AttributeError) {
        guard attributes.count < 1000 else { throw AttributeError(reason: "more than 1000 attributes in one media section") }
        attributes.append(a)
        switch a.name {
        case "rtpmap":
            // `PT NAME/RATE[/CHANNELS]`
            let parts = (a.value ?? "").split(separator: " ", maxSplits: 1)
            let codec = parts.count == 2 ? parts[1].split(separator: "/") : []
            guard parts.count == 2, let pt = UInt8(parts[0]), pt < 128, codec.count >= 2, let rate = Int(codec[1]), rate > 0 else {
                throw AttributeError(reason: "`a=rtpmap` is `PT NAME/RATE[/CHANNELS]`")
            }
            codecs[pt] = Codec(name: codec[0].lowercased(), clockRate: rate, channels: codec.count > 2 ? Int(codec[2]) ?? 1 : 1)
        case "fmtp":
            let parts = (a.value ?? "").split(separator: " ", maxSplits: 1)
            guard parts.count == 2, let pt = UInt8(parts[0]), pt < 128 else { throw AttributeError(reason: "`a=fmtp` is `PT PARAMETERS`") }
            var p: [String: String] = [:]
            for pair in parts[1].split(separator: ";") {
                let kv = pair.split(separator: "=", maxSplits: 1)
                let key = kv.first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
                if !key.isEmpty { p[key] = kv.count > 1 ? String(kv[1]).trimmingCharacters(in: .whitespaces) : "" }
            }
            parameters[pt] = p
        default:
            break
        }
    }

    package func attribute(_ name: String) -> String? { attributes.first { $0.name == name }?.value }
    package func has(_ name: String) -> Bool { attributes.contains { $0.name == name } }
    package var mid: String? { attribute("mid") }
}
