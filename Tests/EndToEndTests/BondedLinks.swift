import Foundation
import XCTest

/// Two network namespaces joined by several links, as a phone's modems and Wi-Fi reach one
/// server address: link `i` is a veth pair, 10.77.i.1 on the sender's side, 10.77.i.2 on the
/// receiver's. The server's address, `server` (10.77.0.2), is reached from 10.77.i.1 over link
/// `i` (a routing rule per source address, as a phone routes each modem's socket), and from any
/// other socket over `plainLink`. Both namespaces have their loopback up. The receiver's host has
/// an address per link besides `server`: a reply its system routes leaves from the link's own
/// address unless the program answers from the address the datagram came to (IP_PKTINFO), except
/// over `plainLink`, whose route leaves from `server` (libsrt answers by the route).
///
/// This machine's kernel has no netem (`tc qdisc add ... netem`: "Specified qdisc kind is
/// unknown"), so a link is shaped otherwise: loss and cuts by nftables rules on the receiver's
/// side of the link (`numgen random`, both directions), a delay by `delayLine`, a relay on the
/// receiver's side that holds each datagram toward the server. Needs root, `ip` and `nft`;
/// removed by `remove()` (call it from a teardown block).
final class BondedLinks: @unchecked Sendable {
    let sender: String
    let receiver: String
    let count: Int
    let server = "10.77.0.2"
    static let nft = ["/usr/sbin/nft", "/sbin/nft"].first { FileManager.default.isExecutableFile(atPath: $0) }

    static var isAvailable: Bool { getuid() == 0 && ShapedLink.ip != nil && nft != nil }

    init(links: Int, plainLink: Int) throws {
        let tag = "\(getpid() % 10000)-\(UInt16.random(in: 0...UInt16.max))"
        sender = "avg-snd-\(tag)"
        receiver = "avg-rcv-\(tag)"
        count = links
        try Self.ip(["netns", "add", sender])
        do {
            try Self.ip(["netns", "add", receiver])
            for ns in [sender, receiver] { try Self.ip(["-n", ns, "link", "set", "lo", "up"]) }
            try Self.ip(["-n", receiver, "addr", "add", "\(server)/32", "dev", "lo"])
            try nft(["add", "table", "inet", "links"])
            try nft(["add", "chain", "inet", "links", "in", "{ type filter hook input priority 0; }"])
            try nft(["add", "chain", "inet", "links", "out", "{ type filter hook output priority 0; }"])
            for i in 1...links {
                let a = "avs\(i)", b = "avr\(i)"
                try Self.ip(["link", "add", a, "netns", sender, "type", "veth", "peer", "name", b, "netns", receiver])
                try Self.ip(["-n", sender, "addr", "add", "\(senderAddress(i))/24", "dev", a])
                try Self.ip(["-n", receiver, "addr", "add", "\(receiverAddress(i))/24", "dev", b])
                try Self.ip(["-n", sender, "link", "set", a, "up"])
                try Self.ip(["-n", receiver, "link", "set", b, "up"])
                try Self.ip(["-n", sender, "rule", "add", "from", senderAddress(i), "table", "\(100 + i)", "pref", "\(100 + i)"])
                try Self.ip(["-n", sender, "route", "add", "\(server)/32", "via", receiverAddress(i), "dev", a, "table", "\(100 + i)"])
                try nft(["add", "chain", "inet", "links", "in\(i)"])
                try nft(["add", "chain", "inet", "links", "out\(i)"])
                try nft(["add", "rule", "inet", "links", "in", "iifname", b, "jump", "in\(i)"])
                try nft(["add", "rule", "inet", "links", "out", "oifname", b, "jump", "out\(i)"])
            }
            try Self.ip(["-n", sender, "route", "add", "\(server)/32", "via", receiverAddress(plainLink)])
            // libsrt 1.5.1 answers from the address its system routes by: over the plain link the
            // server's own address is that route's source, so a plain SRT caller there is answered.
            try Self.ip(["-n", receiver, "route", "replace", "10.77.\(plainLink).0/24", "dev", "avr\(plainLink)", "src", server])
        } catch {
            remove()
            throw error
        }
    }

    func senderAddress(_ link: Int) -> String { "10.77.\(link).1" }
    func receiverAddress(_ link: Int) -> String { "10.77.\(link).2" }

    /// Link `i` drops `percent` of its packets each way at random (100: cut; 0: whole again).
    func setLoss(_ i: Int, percent: Int) throws {
        for chain in ["in\(i)", "out\(i)"] {
            try nft(["flush", "chain", "inet", "links", chain])
            if percent >= 100 {
                try nft(["add", "rule", "inet", "links", chain, "drop"])
            } else if percent > 0 {
                try nft(["add", "rule", "inet", "links", chain, "numgen", "random", "mod", "100", "<", "\(percent)", "drop"])
            }
        }
    }

    /// A relay on the receiver's side of link `i`, at `receiverAddress(i):port`, that hands each
    /// datagram on to `server:to` `ms` later (replies come back at once): a link that slow one
    /// way. Left running; the namespace's removal ends it.
    func delayLine(_ i: Int, port: Int, to: Int, ms: Int) throws -> Process {
        let p = try start(in: receiver, ["/usr/bin/env", "python3", "-c", Self.delayLineScript, receiverAddress(i), "\(port)", server, "\(to)", "\(ms)"])
        usleep(300_000)
        return p
    }

    /// A UDP relay at LISTEN-HOST LISTEN-PORT handing each datagram on to SERVER-HOST SERVER-PORT
    /// MS later, replies back at once (arguments in that order).
    static let delayLineScript = """
        import heapq, select, socket, sys, time
        listen, server, delay = (sys.argv[1], int(sys.argv[2])), (sys.argv[3], int(sys.argv[4])), int(sys.argv[5]) / 1000
        front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); front.bind(listen)
        ways, back, held, n = {}, {}, [], 0
        while True:
            wait = max(0, held[0][0] - time.monotonic()) if held else 1
            for s in select.select([front] + list(ways.values()), [], [], wait)[0]:
                data, source = s.recvfrom(4096)
                if s is front:
                    if source not in ways:
                        w = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); w.connect(server)
                        ways[source] = w; back[w] = source
                    n += 1
                    heapq.heappush(held, (time.monotonic() + delay, n, ways[source], data))
                else:
                    front.sendto(data, back[s])
            while held and held[0][0] <= time.monotonic():
                _, _, w, data = heapq.heappop(held)
                try: w.send(data)
                except OSError: pass
        """

    func remove() {
        _ = try? ServiceUnitTests.run([ShapedLink.ip!, "netns", "delete", sender])
        _ = try? ServiceUnitTests.run([ShapedLink.ip!, "netns", "delete", receiver])
    }

    /// A process inside namespace `ns`, left running.
    func start(in ns: String, _ args: [String], output: FileHandle? = nil) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: ShapedLink.ip!)
        p.arguments = ["netns", "exec", ns] + args
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = output ?? FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    private func nft(_ args: [String]) throws {
        try Self.ip(["netns", "exec", receiver, Self.nft!] + args)
    }

    private static func ip(_ args: [String]) throws {
        let (status, output) = try ServiceUnitTests.run([ShapedLink.ip!] + args)
        guard status == 0 else {
            throw NSError(domain: "BondedLinks", code: Int(status), userInfo: [NSLocalizedDescriptionKey: "ip \(args.joined(separator: " ")): \(output)"])
        }
    }
}
