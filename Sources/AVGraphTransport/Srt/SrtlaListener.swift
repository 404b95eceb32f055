import AVGraph
import Foundation
import CSrt
import Glibc
import Synchronization

/// An SRTLA receiver in front of avgraph's own SRT listener: a phone bonding several links
/// (modems, Wi-Fi) registers a group over them on one UDP port; each group's packets, whichever
/// link brought them, reach a private SRT listener on loopback from one socket of the group's
/// own, as one SRT peer; SRT's replies go back to the sender: its ACKs over every link, the
/// rest over the link heard last. Stream ids, passphrase, keys and timeouts are the SRT
/// listener's own. Each link is acknowledged to the sender every ten data packets (SRTLA_ACK),
/// which is how the sender balances its links. One thread waits in `poll` on the public port,
/// the groups' sockets and the stop pipe.
// @unchecked: a subclass (see PublisherHandoff); `groups`, `ways` and the socket are the thread's
// alone; what others read is in `shared`.
package final class SrtlaListener: PublisherListener, @unchecked Sendable {
    package struct Settings: Sendable {
        package var host: String
        package var port: Int
        package var limits = SrtlaGroups<UdpPeer>.Limits()
        package init(host: String, port: Int, limits: SrtlaGroups<UdpPeer>.Limits = .init()) {
            self.host = host
            self.port = port
            self.limits = limits
        }
    }

    /// One link as `stats` and the page show it.
    package struct Link: Sendable, Equatable {
        package var address: String
        package var packets: Int
        /// This link's part of the group's packets since the last report.
        package var share: Double
        /// Seconds since the link was last heard.
        package var lastHeard: Double
    }

    /// A group's links, reported when one joins or leaves and every few seconds.
    package struct Report: Sendable, Equatable {
        package var group: Int
        /// What changed: `joined ADDRESS`, `left ADDRESS`, `closed`, or nil for the periodic report.
        package var change: String?
        package var links: [Link]
    }

    /// `ADDRESS (N packets, S %, heard T s ago)`, each link.
    package static func describe(_ links: [Link]) -> String {
        links.isEmpty ? "none" : links.map { "\($0.address) (\($0.packets) packets, \(Int(($0.share * 100).rounded())) %, heard \(String(format: "%.1f", $0.lastHeard)) s ago)" }.joined(separator: ", ")
    }

    /// How often the links are reported while a group lives.
    package static let reportInterval = 5.0

    package let settings: Settings
    /// The SRT listener the groups call, on loopback (port chosen by the system).
    package let srt: SrtListener
    private let publicSocket: Int32
    private var groups: SrtlaGroups<UdpPeer>
    /// Each group's socket connected to the SRT listener.
    private var ways: [Int: Int32] = [:]
    private var notes = NoteThrottle()
    /// Packets counted per link at the last periodic report, for each link's share.
    private var reported: [UdpPeer: Int] = [:]
    private var lastReport = 0.0
    fileprivate struct Shared {
        /// The address each group's SRT peer shows (`127.0.0.1:PORT`) and the sender's first link.
        var names: [String: String] = [:]
        var reports: [Report] = []
        var dropped: [String: Int] = [:]
    }
    private let shared: SharedBox

    /// Shared with the SRT listener's naming hook, which outlives no one but is made before `self`.
    private final class SharedBox: Sendable {
        let state = Mutex(Shared())
        func withLock<R>(_ body: (inout Shared) -> R) -> R { state.withLock { body(&$0) } }
    }

    /// What SRT behind a bonding receiver needs: packets of the links cross each other (a link
    /// 150 ms slower than another delivers its packets after their successors), so a gap is
    /// reported as a loss only once 40 later packets came (`SRTO_LOSSMAXTTL`) instead of at
    /// once, and the receive latency covers the slowest link's retransmission.
    package static func bondedSrt(_ settings: SrtListener.Settings) -> SrtListener.Settings {
        var s = settings
        s.reorderTolerance = 40
        return s
    }

    package init(_ settings: Settings, srt srtSettings: SrtListener.Settings) throws {
        self.settings = settings
        groups = SrtlaGroups(limits: settings.limits, hostOf: { $0.host })
        let shared = SharedBox()
        self.shared = shared
        var inner = srtSettings
        inner.host = "127.0.0.1"
        inner.port = 0
        inner.peerName = { address in shared.withLock { $0.names[address] } ?? address }
        srt = try SrtListener(inner)
        let fd = try Self.bind(settings.host, settings.port)
        publicSocket = fd
        do { try super.init(threadName: "srtla-receiver") } catch {
            close(fd)
            throw error
        }
    }

    deinit {
        for fd in ways.values { close(fd) }
        close(publicSocket)
    }

    private static func bind(_ host: String, _ port: Int) throws -> Int32 {
        func fail(_ what: String) -> MediaError { MediaError("cannot listen on srtla://\(host):\(port): \(what): \(String(cString: strerror(errno)))") }
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else { throw MediaError("cannot listen on srtla://\(host):\(port): no such address") }
        defer { freeaddrinfo(list) }
        let fd = socket(first.pointee.ai_family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw fail("socket") }
        _ = avg_udp_want_destination(fd, first.pointee.ai_family)
        // Several links' bursts land on one socket: room for about a second of a 20 Mbit/s stream.
        var size: Int32 = 4 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        guard Glibc.bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            let error = fail("bind")
            close(fd)
            throw error
        }
        return fd
    }

    /// The groups' SRT callers and their publishers are the SRT listener's.
    package override func next() -> PublisherStream? { srt.next() }

    package override func takeNotes() -> [String] { super.takeNotes() + srt.takeNotes() }

    /// Link changes and periodic link figures since the last call.
    package func takeReports() -> [Report] {
        shared.withLock { s in
            defer { s.reports.removeAll() }
            return s.reports
        }
    }

    /// Packets dropped so far, by reason (`unknown-peer`, `garbage`, `link-limit`...).
    package var dropped: [String: Int] { shared.withLock { $0.dropped } }

    package override func start() {
        srt.start()
        super.start()
    }

    package override func stop() {
        super.stop()
        srt.stop()
    }

    package override func run() {
        var buffer = [UInt8](repeating: 0, count: 2048)
        while !isStopped {
            let order = Array(ways)
            var fds = [pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0), pollfd(fd: publicSocket, events: Int16(POLLIN), revents: 0)]
            fds += order.map { pollfd(fd: $0.value, events: Int16(POLLIN), revents: 0) }
            let now = Monotonic.now
            let until = min(groups.nextExpiry() ?? now + 1, now + 1)
            let n = poll(&fds, nfds_t(fds.count), Int32(max(0, until - now) * 1000) + 1)
            if isStopped { break }
            if n > 0 {
                if fds[0].revents != 0 { drainWake() }
                if fds[1].revents != 0 { receiveFromSenders(&buffer) }
                for (i, way) in order.enumerated() where fds[i + 2].revents != 0 { receiveFromSrt(group: way.key, fd: way.value, &buffer) }
            }
            apply(groups.expire(now: Monotonic.now), packet: UnsafeRawBufferPointer(start: nil, count: 0), from: nil)
            reportIfDue()
        }
    }

    /// At most a few hundred packets a wake: the groups' sockets and the stop get their turn under a flood.
    private func receiveFromSenders(_ buffer: inout [UInt8]) {
        for _ in 0..<256 {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            var destinationLength: Int32 = 0
            let n = buffer.withUnsafeMutableBytes { b in
                avg_udp_receive(publicSocket, b.baseAddress, b.count, &address, &length, &sentTo, &destinationLength)
            }
            guard n >= 0 else { return }
            guard let peer = UdpPeer(address) else { continue }
            // Answers leave from the address the sender sent to (a host with several: the sender drops any other):
            // this datagram's own, then, for a link, the one it last used.
            current = (peer, Int(destinationLength))
            defer { current = nil }
            buffer.withUnsafeBytes { b in
                let packet = UnsafeRawBufferPointer(rebasing: b[0..<Int(n)])
                apply(groups.receive(packet, from: peer, now: Monotonic.now), packet: packet, from: peer)
            }
            // Copied only when a link's address changes: not a copy a datagram.
            if destinationLength > 0, groups.group(of: peer) != nil, answerFrom[peer].map({ !$0.elementsEqual(sentTo.prefix(Int(destinationLength))) }) ?? true {
                answerFrom[peer] = Array(sentTo.prefix(Int(destinationLength)))
            }
        }
    }

    private func receiveFromSrt(group: Int, fd: Int32, _ buffer: inout [UInt8]) {
        for _ in 0..<256 {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n >= 0 else { return }
            buffer.withUnsafeBytes { b in
                let packet = UnsafeRawBufferPointer(rebasing: b[0..<n])
                for peer in groups.destinations(ofReply: packet, group: group) { send(packet, to: peer) }
            }
        }
    }

    private func send(_ bytes: UnsafeRawBufferPointer, to peer: UdpPeer) {
        if let current, current.source == peer {
            _ = peer.withSockaddr { to, length in avg_udp_send_from(publicSocket, bytes.baseAddress, bytes.count, to, length, sentTo, Int32(current.sentToLength)) }
            return
        }
        let from = answerFrom[peer] ?? []
        _ = peer.withSockaddr { to, length in avg_udp_send_from(publicSocket, bytes.baseAddress, bytes.count, to, length, from, Int32(from.count)) }
    }

    private func apply(_ actions: [SrtlaGroups<UdpPeer>.Action], packet: UnsafeRawBufferPointer, from peer: UdpPeer?) {
        for action in actions {
            switch action {
            case .reply(let to, let bytes): bytes.withUnsafeBytes { send($0, to: to) }
            case .echo(let to): send(packet, to: to)
            case .forward(let group):
                if let fd = ways[group] { _ = Glibc.send(fd, packet.baseAddress, packet.count, 0) }
            case .opened(let group): open(group, first: peer)
            case .closed(let group): closeWay(group)
            case .drop(let reason):
                shared.withLock { $0.dropped[reason.rawValue, default: 0] += 1 }
                noteDrop(reason, peer: peer)
            }
        }
        if let peer, let g = groups.group(of: peer), let links = groups.groups[g]?.links, links.count != reportedLinks[g] {
            linksChanged(g, joined: peer)
        }
    }

    /// The address each link sent to, which its answers leave from.
    private var answerFrom: [UdpPeer: [UInt8]] = [:]
    /// The datagram being handled: its source and the address it was sent to.
    private var current: (source: UdpPeer, sentToLength: Int)?
    /// Its destination address (the first `sentToLength` bytes), received into one buffer for every datagram.
    private var sentTo = [UInt8](repeating: 0, count: 16)
    /// Link counts as last reported, to say each join once.
    private var reportedLinks: [Int: Int] = [:]

    private func linksChanged(_ group: Int, joined peer: UdpPeer) {
        reportedLinks[group] = groups.groups[group]?.links.count
        report(group, change: "joined \(peer)")
    }

    private func open(_ group: Int, first peer: UdpPeer?) {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        var local = sockaddr_in(), target = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        target = local
        target.sin_port = in_port_t(srt.boundPort).bigEndian
        let ok = fd >= 0 && withUnsafePointer(to: &local, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }) == 0
            && withUnsafePointer(to: &target, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }) == 0
        guard ok else {
            if fd >= 0 { close(fd) }
            note("srtla: group \(group) from \(peer.map(String.init(describing:)) ?? "?"): no socket to the SRT listener: \(String(cString: strerror(errno)))")
            return
        }
        var size: Int32 = 4 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        ways[group] = fd
        if let mine = Self.localAddress(fd), let peer {
            shared.withLock { $0.names[mine.description] = "\(peer) (srtla group \(group))" }
        }
    }

    /// The address a group's socket is bound to: how the SRT listener names that caller.
    private static func localAddress(_ fd: Int32) -> UdpPeer? {
        var bound = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return UdpPeer(bound)
    }

    private func closeWay(_ group: Int) {
        guard let fd = ways.removeValue(forKey: group) else { return }
        let name = Self.localAddress(fd)?.description
        close(fd)
        // Late: the SRT listener may still name the caller while its session drains.
        DispatchQueue.global().asyncAfter(deadline: .now() + 30) { [shared] in _ = shared.withLock { s in name.map { s.names.removeValue(forKey: $0) } } }
        reportedLinks[group] = nil
        shared.withLock { $0.reports.append(Report(group: group, change: "closed", links: [])) }
    }

    private func noteDrop(_ reason: SrtlaGroups<UdpPeer>.Drop, peer: UdpPeer?) {
        let why: String
        switch reason {
        case .garbage, .unknownPeer, .replaced: return  // counted only: stray packets say nothing each
        case .unknownGroup: why = "refused: registration for a group this receiver never issued (REG_NGP)"
        case .groupLimit: why = "refused: \(settings.limits.groups) groups are live (REG_ERR)"
        case .linkLimit: why = "refused: its group has \(settings.limits.linksPerGroup) links already (REG_ERR)"
        case .claimed: why = "refused: its group id is another sender's (REG_NAK)"
        case .otherGroup: why = "refused: this link belongs to another group (REG_ERR)"
        case .registrationFlood: why = "dropped: more than \(Int(settings.limits.registrationsPerSecond)) registrations a second"
        }
        if let more = notes.pass(reason.rawValue) { note("srtla \(peer.map(String.init(describing:)) ?? "?"): \(why)" + NoteThrottle.suffix(more)) }
    }

    private func report(_ group: Int, change: String?) {
        guard let g = groups.groups[group] else { return }
        let now = Monotonic.now
        // A link that left and joined again counts from zero: its old baseline is no floor.
        let fresh = g.links.map { max(0, $0.packets - (reported[$0.peer] ?? 0)) }
        let total = max(1, fresh.reduce(0, +))
        let links = zip(g.links, fresh).map { l, n in
            Link(address: l.peer.description, packets: l.packets, share: Double(n) / Double(total), lastHeard: now - l.lastHeard)
        }
        if change == nil { for l in g.links { reported[l.peer] = l.packets } } else if change == "left" {
            let live = Set(g.links.map(\.peer))
            reported = reported.filter { live.contains($0.key) || groups.group(of: $0.key) != group }
        }
        shared.withLock { s in if s.reports.count < 256 { s.reports.append(Report(group: group, change: change, links: links)) } }
    }

    private func reportIfDue() {
        let now = Monotonic.now
        // Links that left since: said once, with what the group has now.
        for (group, count) in reportedLinks where (groups.groups[group]?.links.count ?? 0) < count {
            reportedLinks[group] = groups.groups[group]?.links.count
            report(group, change: "left")
        }
        guard now - lastReport >= Self.reportInterval else { return }
        lastReport = now
        let live = Set(groups.groups.values.flatMap { $0.links.map(\.peer) })
        reported = reported.filter { live.contains($0.key) }
        answerFrom = answerFrom.filter { live.contains($0.key) }
        for g in groups.groups.keys.sorted() { report(g, change: nil) }
    }
}
