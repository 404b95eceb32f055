/// The bookkeeping of an SRTLA receiver, apart from its sockets (so tests and the fuzzer drive it
/// with any `Peer`): which link belongs to which group, what each packet asks for in return, and
/// when a silent link or group goes. The receiver applies the `Action`s it returns.
package struct SrtlaGroups<Peer: Hashable & Sendable>: Sendable {
    package struct Limits: Sendable, Equatable {
        /// Links one group may bond (the reference's 8: a phone's modems and Wi-Fi).
        package var linksPerGroup = 8
        /// Groups at once (the reference's 200).
        package var groups = 200
        /// A link silent this long is dropped; a group with no link left then goes too.
        package var linkTimeout = 10.0
        /// A group registered (REG1) whose first link never joined (REG2) is forgotten after this long.
        package var registrationTimeout = 10.0
        /// Registrations (REG1 and REG2) answered per second, all peers together; past it they are dropped.
        package var registrationsPerSecond = 200.0
        /// Groups registered (REG1) but not joined yet, per sending host; a further REG1 replaces the oldest.
        package var pendingPerHost = 8
        package init() {}
    }

    package struct LinkState: Sendable {
        package let peer: Peer
        package var packets = 0
        package var bytes = 0
        package var joined: Double
        package var lastHeard: Double
        /// SRT data sequence numbers received on this link since its last SRTLA_ACK.
        var unacked: [UInt32] = []
    }

    package struct GroupState: Sendable {
        package let number: Int
        package let id: [UInt8]
        /// Links in the order they joined.
        package var links: [LinkState] = []
        package var created: Double
        /// Where its REG1 came from (`hostOf`).
        let host: [UInt64]
        /// The link heard last: SRT's replies other than ACKs go there.
        var lastLink: Peer?
        package var packets: Int { links.reduce(0) { $0 + $1.packets } }
    }

    package enum Action: Equatable, Sendable {
        /// Send these bytes to the peer (registration answers, acks).
        case reply(Peer, [UInt8])
        /// Send the packet just received back to the peer unchanged (a keepalive).
        case echo(Peer)
        /// Hand the packet just received to the group's SRT peer.
        case forward(group: Int)
        /// A new group: make its way to the SRT listener.
        case opened(group: Int)
        /// A group is gone: close its way to the SRT listener.
        case closed(group: Int)
        /// Drop the packet and count it under this reason.
        case drop(Drop)
    }

    package enum Drop: String, Sendable, CaseIterable {
        case garbage, unknownPeer = "unknown-peer", unknownGroup = "unknown-group", groupLimit = "group-limit"
        case linkLimit = "link-limit", claimed, otherGroup = "other-group", registrationFlood = "registration-flood"
        /// A registered group no link joined, given up for a newer registration.
        case replaced
    }

    package let limits: Limits
    package private(set) var groups: [Int: GroupState] = [:]
    private var byPeer: [Peer: Int] = [:]
    private var byID: [[UInt8]: Int] = [:]
    private var nextNumber = 1
    /// Registrations answered in the current second, for the flood bound.
    private var registrationWindow: (start: Double, count: Int) = (0, 0)
    package private(set) var dropped: [Drop: Int] = [:]
    /// The receiver's half of each id: random bytes, from the caller's source of randomness.
    private let randomHalf: @Sendable () -> [UInt8]
    /// The host part of a peer (its address without the port): one host's many ports are one sender's.
    private let hostOf: @Sendable (Peer) -> [UInt64]

    package init(limits: Limits = Limits(), randomHalf: @escaping @Sendable () -> [UInt8] = { (0..<128).map { _ in UInt8.random(in: 0...255) } },
                 hostOf: @escaping @Sendable (Peer) -> [UInt64] = { [UInt64(bitPattern: Int64($0.hashValue))] }) {
        self.limits = limits
        self.randomHalf = randomHalf
        self.hostOf = hostOf
    }

    package func group(of peer: Peer) -> Int? { byPeer[peer] }

    /// What to do with `packet`, just received from `peer` at `now`.
    package mutating func receive(_ packet: UnsafeRawBufferPointer, from peer: Peer, now: Double) -> [Action] {
        let kind = SrtlaPacket(packet)
        switch kind {
        case .reg1(let id): return register(id, from: peer, now: now)
        case .reg2(let id): return join(id, from: peer, now: now)
        case .keepalive:
            guard heard(peer, now: now, bytes: 0, counted: false) != nil else { return drop(.unknownPeer) }
            return [.echo(peer)]
        case .srtData(let sequence):
            guard let g = heard(peer, now: now, bytes: packet.count, counted: true), let i = groups[g]?.links.firstIndex(where: { $0.peer == peer }) else {
                return drop(.unknownPeer)
            }
            groups[g]!.links[i].unacked.append(sequence)
            var actions: [Action] = [.forward(group: g)]
            if groups[g]!.links[i].unacked.count >= SrtlaPacket.ackedPerAck {
                actions.append(.reply(peer, SrtlaPacket.ack(sequences: groups[g]!.links[i].unacked).bytes))
                groups[g]!.links[i].unacked.removeAll(keepingCapacity: true)
            }
            return actions
        case .srtControl:
            guard let g = heard(peer, now: now, bytes: packet.count, counted: true) else { return drop(.unknownPeer) }
            return [.forward(group: g)]
        case .reg3, .ack, .regError, .regNoGroup, .regRefused, .garbage:
            // The receiver's own packets, or nothing: a sender never sends them here.
            return drop(.garbage)
        }
    }

    /// Where a reply of the group's SRT peer goes: SRT's ACKs to every link (each link's sender
    /// side learns what arrived whichever link brought it), anything else to the link heard last.
    package func destinations(ofReply packet: UnsafeRawBufferPointer, group: Int) -> [Peer] {
        guard let g = groups[group] else { return [] }
        if case .srtControl(let type) = SrtlaPacket(packet), type == SrtlaPacket.srtAckControlType { return g.links.map(\.peer) }
        return g.lastLink.map { [$0] } ?? []
    }

    /// Links silent past the timeout leave their group; a group with no link left (or never
    /// joined) goes. Returns the closed groups' actions.
    package mutating func expire(now: Double) -> [Action] {
        var actions: [Action] = []
        for (number, g) in groups {
            let alive = g.links.filter { now - $0.lastHeard < limits.linkTimeout }
            for gone in g.links where now - gone.lastHeard >= limits.linkTimeout { byPeer[gone.peer] = nil }
            groups[number]!.links = alive
            if let last = g.lastLink, !alive.contains(where: { $0.peer == last }) { groups[number]!.lastLink = alive.max { $0.lastHeard < $1.lastHeard }?.peer }
            let unjoinedTooLong = g.links.isEmpty && now - g.created >= limits.registrationTimeout
            if (alive.isEmpty && !g.links.isEmpty) || unjoinedTooLong {
                close(number)
                actions.append(.closed(group: number))
            }
        }
        return actions
    }

    /// The next time `expire` may change something.
    package func nextExpiry() -> Double? {
        groups.values.map { g in
            g.links.isEmpty ? g.created + limits.registrationTimeout : g.links.map(\.lastHeard).min()! + limits.linkTimeout
        }.min()
    }

    private mutating func close(_ number: Int) {
        guard let g = groups.removeValue(forKey: number) else { return }
        for l in g.links { byPeer[l.peer] = nil }
        byID[g.id] = nil
    }

    private mutating func drop(_ reason: Drop) -> [Action] {
        dropped[reason, default: 0] += 1
        return [.drop(reason)]
    }

    /// A registration may be answered: at most `registrationsPerSecond`, so a flood costs a count, not work.
    private mutating func admitRegistration(now: Double) -> Bool {
        if now - registrationWindow.start >= 1 { registrationWindow = (now, 0) }
        guard Double(registrationWindow.count) < limits.registrationsPerSecond else { return false }
        registrationWindow.count += 1
        return true
    }

    private mutating func register(_ senderID: [UInt8], from peer: Peer, now: Double) -> [Action] {
        guard admitRegistration(now: now) else { return drop(.registrationFlood) }
        // A link belongs to one group: its sender must let it go (silence) before it opens another.
        if byPeer[peer] != nil { return drop(.otherGroup) + [.reply(peer, SrtlaPacket.regError.bytes)] }
        let half = Array(senderID.prefix(128))
        if let (number, g) = groups.first(where: { Array($0.value.id.prefix(128)) == half }) {
            // The same REG1 again (its REG2 was lost) gets the same id; another sender claiming it is refused.
            if g.links.isEmpty || g.lastLink == peer { return [.reply(peer, SrtlaPacket.reg2(id: groups[number]!.id).bytes)] }
            return drop(.claimed) + [.reply(peer, SrtlaPacket.regRefused.bytes)]
        }
        // Groups no link has joined yet are the cheap ones to make: a flood of REG1s replaces
        // its own (per host, then the oldest anywhere) and never locks out a sender that joined.
        let host = hostOf(peer)
        let pending = groups.values.filter { $0.links.isEmpty }
        let mine = pending.filter { $0.host == host }
        if mine.count >= limits.pendingPerHost, let oldest = mine.min(by: { $0.created < $1.created }) {
            close(oldest.number)
            dropped[.replaced, default: 0] += 1
        } else if groups.count >= limits.groups {
            guard let oldest = pending.min(by: { $0.created < $1.created }) else { return drop(.groupLimit) + [.reply(peer, SrtlaPacket.regError.bytes)] }
            close(oldest.number)
            dropped[.replaced, default: 0] += 1
        }
        let id = half + randomHalf().prefix(128)
        let number = nextNumber
        nextNumber += 1
        groups[number] = GroupState(number: number, id: id, created: now, host: host)
        byID[id] = number
        return [.opened(group: number), .reply(peer, SrtlaPacket.reg2(id: id).bytes)]
    }

    private mutating func join(_ id: [UInt8], from peer: Peer, now: Double) -> [Action] {
        guard admitRegistration(now: now) else { return drop(.registrationFlood) }
        guard let number = byID[id], var g = groups[number] else { return drop(.unknownGroup) + [.reply(peer, SrtlaPacket.regNoGroup.bytes)] }
        if let other = byPeer[peer], other != number { return drop(.otherGroup) + [.reply(peer, SrtlaPacket.regError.bytes)] }
        if let i = g.links.firstIndex(where: { $0.peer == peer }) {
            // A repeated REG2 (its REG3 was lost): the link stays as it is.
            g.links[i].lastHeard = now
        } else {
            guard g.links.count < limits.linksPerGroup else { return drop(.linkLimit) + [.reply(peer, SrtlaPacket.regError.bytes)] }
            g.links.append(LinkState(peer: peer, joined: now, lastHeard: now))
            byPeer[peer] = number
        }
        if g.lastLink == nil { g.lastLink = peer }
        groups[number] = g
        return [.reply(peer, SrtlaPacket.reg3.bytes)]
    }

    /// Marks `peer`'s link heard; its group, or nil for a peer in none.
    private mutating func heard(_ peer: Peer, now: Double, bytes: Int, counted: Bool) -> Int? {
        guard let number = byPeer[peer], let i = groups[number]?.links.firstIndex(where: { $0.peer == peer }) else { return nil }
        groups[number]!.links[i].lastHeard = now
        if counted {
            groups[number]!.links[i].packets += 1
            groups[number]!.links[i].bytes += bytes
        }
        groups[number]!.lastLink = peer
        return number
    }
}
