import Foundation

/// The connections at a publisher door that have proved nothing yet (no publish with a valid
/// key), and which one to close when a newcomer needs the place. A newcomer is never refused
/// for them: a port scanner, a stuck NAT or a slowloris holding every place would otherwise
/// lock every phone out. Each address (an IPv6 one by its /64, which one host owns) may hold
/// `perAddress` places; the whole door `total`. When a limit is reached, the longest-waiting
/// connection within it goes, one that has sent nothing before one that has spoken (a phone
/// halfway through its handshake outlives a flood of silent connections that came after it).
/// Pure bookkeeping: the listener closes what `enter` names.
public struct WaitingRoom<ID: Hashable>: Sendable where ID: Sendable {
    public struct Limits: Sendable, Equatable {
        public var total: Int
        public var perAddress: Int
        public init(total: Int = 1024, perAddress: Int = 64) {
            self.total = max(1, total)
            self.perAddress = max(1, min(perAddress, self.total))
        }
    }

    private struct Entry: Sendable {
        let group: String
        let order: UInt64
        var spoke = false
    }

    public let limits: Limits
    private var entries: [ID: Entry] = [:]
    private var byGroup: [String: Int] = [:]
    private var arrivals: UInt64 = 0

    public init(limits: Limits = Limits()) { self.limits = limits }

    public var count: Int { entries.count }

    public func count(from address: String) -> Int { byGroup[Self.group(of: address)] ?? 0 }

    public func contains(_ id: ID) -> Bool { entries[id] != nil }

    /// Takes `id` in; returns the connections to close for it (none while there is room, at most
    /// one per limit reached), which have already left the room.
    public mutating func enter(_ id: ID, address: String) -> [ID] {
        let group = Self.group(of: address)
        var evicted: [ID] = []
        if byGroup[group, default: 0] >= limits.perAddress, let victim = firstToGo(in: group) {
            evicted.append(victim)
            leave(victim)
        }
        if entries.count >= limits.total, let victim = firstToGo(in: nil) {
            evicted.append(victim)
            leave(victim)
        }
        arrivals += 1
        entries[id] = Entry(group: group, order: arrivals)
        byGroup[group, default: 0] += 1
        return evicted
    }

    /// `id` sent its first bytes: it goes after the silent ones.
    public mutating func spoke(_ id: ID) { entries[id]?.spoke = true }

    /// `id` proved itself (admitted) or closed.
    public mutating func leave(_ id: ID) {
        guard let e = entries.removeValue(forKey: id) else { return }
        let left = byGroup[e.group, default: 1] - 1
        byGroup[e.group] = left > 0 ? left : nil
    }

    /// The silent one that came first, else the one that came first; within `group` when given.
    private func firstToGo(in group: String?) -> ID? {
        var best: (id: ID, entry: Entry)?
        for (id, e) in entries where group == nil || e.group == group {
            guard let b = best else { best = (id, e); continue }
            if (e.spoke ? 1 : 0, e.order) < (b.entry.spoke ? 1 : 0, b.entry.order) { best = (id, e) }
        }
        return best?.id
    }

    /// The warning for a connection at `address` closed to make room: how many `waiting` (what
    /// they wait for) and how many of them are from its address.
    public func displacedNote(_ address: String, waiting: String) -> String {
        "\(address): closed: \(count) \(waiting) (\(count(from: address)) from its address); the longest-waiting gave its place to a newcomer"
    }

    /// What one party owns: an IPv4 address, or an IPv6 address's /64. `address` may carry a
    /// port (`1.2.3.4:5`, `[::1]:5`) or not.
    public static func group(of address: String) -> String {
        var host = Substring(address)
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            host = host[host.index(after: host.startIndex)..<close]
        } else if host.count(where: { $0 == ":" }) == 1, let colon = host.firstIndex(of: ":") {
            host = host[..<colon]
        }
        var v6 = in6_addr()
        guard host.contains(":"), inet_pton(AF_INET6, String(host), &v6) == 1 else { return String(host) }
        let bytes = withUnsafeBytes(of: &v6) { Array($0.prefix(8)) }
        // An IPv4-mapped address is that IPv4 address.
        if bytes.allSatisfy({ $0 == 0 }) {
            let tail = withUnsafeBytes(of: &v6) { Array($0[8..<16]) }
            if tail[0..<2] == [0, 0], tail[2..<4] == [0xff, 0xff] { return tail[4...].map(String.init).joined(separator: ".") }
        }
        return stride(from: 0, to: 8, by: 2).map { String(format: "%x", UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1])) }.joined(separator: ":") + "::/64"
    }
}
