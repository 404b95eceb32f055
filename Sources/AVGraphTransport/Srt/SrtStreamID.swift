import Foundation

/// A caller's SRT stream id, as the `srt` listener reads it: plain (`cam-42f`: the id is the
/// key), or in SRT's access-control form (`#!::r=live/phone,m=publish,u=alice`, libsrt's
/// docs/features/access-control.md), which phone apps send: comma-separated `key=value` pairs
/// whose `r=` (the resource) is the key, `u=` the user and `m=` what the caller wants to do.
package struct SrtStreamID: Equatable {
    package static let accessControlPrefix = "#!::"

    /// The id as the caller sent it.
    package let raw: String
    /// What the keys are compared with: `r=` in the access-control form, the whole id otherwise
    /// (nil: the access-control form without `r=`).
    package let resource: String?
    package let user: String?
    /// `m=` as given: `request` (receive), `publish`, `bidirectional`.
    package let mode: String?

    package init(_ raw: String) {
        self.raw = raw
        guard raw.hasPrefix(Self.accessControlPrefix) else {
            (resource, user, mode) = (raw, nil, nil)
            return
        }
        var values: [String: String] = [:]
        for pair in raw.dropFirst(Self.accessControlPrefix.count).split(separator: ",") {
            guard let eq = pair.firstIndex(of: "=") else { continue }
            // The first of a repeated key wins, as in libsrt's own parser.
            let key = String(pair[..<eq])
            if values[key] == nil { values[key] = String(pair[pair.index(after: eq)...]) }
        }
        (resource, user, mode) = (values["r"], values["u"], values["m"])
    }

    /// Whether the caller means to send. SRT's default mode is `request`, but a phone that names
    /// only its resource is publishing: only an `m=` that says otherwise is refused.
    package var publishes: Bool { mode == nil || mode == "publish" || mode == "bidirectional" }

    /// The strings a key may equal: the resource, and the whole id (a key written in full, as
    /// before the access-control form was read).
    package var candidates: [String] { [resource, raw == resource ? nil : raw].compactMap { $0 } }

    /// `m=` and `u=` for a warning: printable, bounded (they come from the network; the resource
    /// is a key and never shown).
    package static func printable(_ s: String) -> String {
        String(String.UnicodeScalarView(s.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7f }.prefix(64)))
    }
}
