import AVGraphTransport
import XCTest

/// The SRTLA receiver's bookkeeping, packet by packet, as the protocol's description has it
/// (registration halves, REG3 per link, keepalives echoed, an SRTLA_ACK of ten sequence
/// numbers per link, SRT's ACKs to every link) and its refusals.
final class SrtlaGroupsTests: XCTestCase {
    typealias Groups = SrtlaGroups<String>

    static let receiverHalf = [UInt8](repeating: 0xAB, count: 128)
    static func groups(_ limits: Groups.Limits = .init()) -> Groups { Groups(limits: limits, randomHalf: { receiverHalf }) }

    static func senderID(_ byte: UInt8) -> [UInt8] { [UInt8](repeating: byte, count: 128) + [UInt8](repeating: 0, count: 128) }

    static func receive(_ g: inout Groups, _ packet: SrtlaPacket, from peer: String, at now: Double = 0) -> [Groups.Action] {
        packet.bytes.withUnsafeBytes { g.receive($0, from: peer, now: now) }
    }

    static func receive(_ g: inout Groups, bytes: [UInt8], from peer: String, at now: Double = 0) -> [Groups.Action] {
        bytes.withUnsafeBytes { g.receive($0, from: peer, now: now) }
    }

    /// REG1 on the first link, REG2 on each: the group's id, number and the links' REG3s.
    static func register(_ g: inout Groups, links: [String], id: UInt8 = 1) -> (id: [UInt8], group: Int) {
        let first = receive(&g, .reg1(id: senderID(id)), from: links[0])
        guard case .opened(let number) = first.first, case .reply(_, let reply) = first.last else { return ([], 0) }
        let whole = reply.withUnsafeBytes { SrtlaPacket($0) }
        guard case .reg2(let groupID) = whole else { return ([], 0) }
        for l in links { _ = receive(&g, .reg2(id: groupID), from: l) }
        return (groupID, number)
    }

    func testRegistrationKeepsTheSendersHalfAndAddsTheReceivers() {
        var g = Self.groups()
        let actions = Self.receive(&g, .reg1(id: Self.senderID(7)), from: "a")
        XCTAssertEqual(actions, [.opened(group: 1), .reply("a", SrtlaPacket.reg2(id: [UInt8](repeating: 7, count: 128) + Self.receiverHalf).bytes)])
        let id = [UInt8](repeating: 7, count: 128) + Self.receiverHalf
        XCTAssertEqual(Self.receive(&g, .reg2(id: id), from: "a"), [.reply("a", SrtlaPacket.reg3.bytes)])
        XCTAssertEqual(Self.receive(&g, .reg2(id: id), from: "b"), [.reply("b", SrtlaPacket.reg3.bytes)])
        XCTAssertEqual(g.groups[1]?.links.map(\.peer), ["a", "b"])
        XCTAssertEqual(SrtlaPacket.reg1(id: Self.senderID(7)).bytes.count, 258, "REG1 is the type and the 256-byte id")
    }

    func testKeepalivesEchoedAndDataForwardedWithAnAckEveryTenPackets() {
        var g = Self.groups()
        let (_, group) = Self.register(&g, links: ["a", "b"])
        XCTAssertEqual(Self.receive(&g, bytes: [0x90, 0x00, 1, 2, 3, 4], from: "b"), [.echo("b")], "a keepalive goes back unchanged")
        var acks: [[UInt8]] = []
        for seq in UInt32(100)..<UInt32(125) {
            let actions = Self.receive(&g, .srtData(sequence: seq), from: seq % 5 == 0 ? "b" : "a")
            XCTAssertEqual(actions.first, .forward(group: group))
            for case .reply(let to, let bytes) in actions {
                XCTAssertEqual(to, "a")
                acks.append(bytes)
            }
        }
        // 20 of the 25 packets came over a: two acks of ten; b brought 5, not yet acknowledged.
        XCTAssertEqual(acks.count, 2)
        let first = acks[0].withUnsafeBytes { SrtlaPacket($0) }
        XCTAssertEqual(first, .ack(sequences: (101...112).filter { $0 % 5 != 0 }.map(UInt32.init)))
        XCTAssertEqual(Array(acks[0].prefix(4)), [0x91, 0x00, 0, 0], "0x9100 in the first word's top 16 bits")
        XCTAssertEqual(acks[0].count, 44)
        XCTAssertEqual(g.groups[group]?.links.map(\.packets), [20, 5])
    }

    func testSrtAcksGoToEveryLinkTheRestToTheLinkHeardLast() {
        var g = Self.groups()
        let (_, group) = Self.register(&g, links: ["a", "b", "c"])
        _ = Self.receive(&g, .srtData(sequence: 1), from: "b")
        let ack = SrtlaPacket.srtControl(type: 0x0002).bytes, nak = SrtlaPacket.srtControl(type: 0x0003).bytes
        XCTAssertEqual(ack.withUnsafeBytes { g.destinations(ofReply: $0, group: group) }, ["a", "b", "c"])
        XCTAssertEqual(nak.withUnsafeBytes { g.destinations(ofReply: $0, group: group) }, ["b"])
        _ = Self.receive(&g, .keepalive, from: "c")
        XCTAssertEqual(SrtlaPacket.srtData(sequence: 9).bytes.withUnsafeBytes { g.destinations(ofReply: $0, group: group) }, ["c"])
    }

    func testRefusals() {
        var limits = Groups.Limits()
        limits.linksPerGroup = 4
        limits.groups = 2
        var g = Self.groups(limits)
        let (id, group) = Self.register(&g, links: ["a", "b", "c", "d"])
        // An id never issued: REG_NGP.
        var unknown = id
        unknown[200] ^= 0xFF
        XCTAssertEqual(Self.receive(&g, .reg2(id: unknown), from: "x"), [.drop(.unknownGroup), .reply("x", SrtlaPacket.regNoGroup.bytes)])
        // A fifth link where the limit is 4: REG_ERR, the group as it was.
        XCTAssertEqual(Self.receive(&g, .reg2(id: id), from: "e"), [.drop(.linkLimit), .reply("e", SrtlaPacket.regError.bytes)])
        // Another sender claiming the group's half: REG_NAK.
        XCTAssertEqual(Self.receive(&g, .reg1(id: Self.senderID(1)), from: "y"), [.drop(.claimed), .reply("y", SrtlaPacket.regRefused.bytes)])
        // A link of this group opening another: REG_ERR.
        XCTAssertEqual(Self.receive(&g, .reg1(id: Self.senderID(2)), from: "a"), [.drop(.otherGroup), .reply("a", SrtlaPacket.regError.bytes)])
        // Data and keepalives from a peer in no group, and garbage: dropped.
        XCTAssertEqual(Self.receive(&g, .srtData(sequence: 5), from: "z"), [.drop(.unknownPeer)])
        XCTAssertEqual(Self.receive(&g, .keepalive, from: "z"), [.drop(.unknownPeer)])
        XCTAssertEqual(Self.receive(&g, bytes: [1, 2, 3], from: "a"), [.drop(.garbage)])
        XCTAssertEqual(Self.receive(&g, bytes: [0x92, 0x00, 1], from: "a"), [.drop(.garbage)], "a REG1 of the wrong length")
        // Groups past the limit: REG_ERR.
        _ = Self.register(&g, links: ["p"], id: 3)
        XCTAssertEqual(Self.receive(&g, .reg1(id: Self.senderID(4)), from: "q"), [.drop(.groupLimit), .reply("q", SrtlaPacket.regError.bytes)])
        XCTAssertEqual(g.groups[group]?.links.map(\.peer), ["a", "b", "c", "d"], "the running group untouched")
        XCTAssertEqual(g.dropped[.unknownPeer], 2)
    }

    func testARegistrationFloodIsBoundedPerSecond() {
        var limits = Groups.Limits()
        limits.registrationsPerSecond = 50
        limits.groups = 100_000
        var g = Self.groups(limits)
        var answered = 0
        for i in 0..<10_000 {
            let actions = Self.receive(&g, .reg1(id: Self.senderID(UInt8(i % 256)) + []), from: "flood\(i)", at: Double(i) / 10_000)
            if actions.contains(where: { if case .reply = $0 { true } else { false } }) { answered += 1 }
        }
        XCTAssertEqual(answered, 50, "one second's worth of registrations answered")
        XCTAssertEqual(g.dropped[.registrationFlood], 9_950)
    }

    /// REG1s nobody follows with a REG2 (one host's many ports, or many hosts) take the place of
    /// one another: a sender arriving after them still registers, the joined group stays.
    func testRegistrationsNobodyJoinsNeverLockASenderOut() {
        var limits = Groups.Limits()
        limits.groups = 10
        limits.pendingPerHost = 3
        limits.registrationsPerSecond = 1000
        var g = Groups(limits: limits, randomHalf: { Self.receiverHalf }, hostOf: { [UInt64($0.split(separator: ":")[0].count)] })
        let (_, joined) = Self.register(&g, links: ["phone:1", "phone:2"])
        for i in 0..<100 { _ = Self.receive(&g, .reg1(id: Self.senderID(UInt8(10 + i))), from: "attacker:\(i)", at: Double(i) / 1000) }
        XCTAssertEqual(g.groups.values.filter { $0.links.isEmpty }.count, 3, "one host holds 3 registrations nobody joined")
        for i in 0..<100 { _ = Self.receive(&g, .reg1(id: Self.senderID(UInt8(120 + i))), from: "\(String(repeating: "x", count: i + 10)):1", at: 0.5) }
        XCTAssertEqual(g.groups.count, 10, "the limit holds")
        let (_, late) = Self.register(&g, links: ["late:1"], id: 250)
        XCTAssertNotEqual(late, 0, "a sender after the flood registers")
        XCTAssertEqual(g.groups[late]?.links.count, 1)
        XCTAssertEqual(g.groups[joined]?.links.count, 2, "the joined group is never given up")
        XCTAssertGreaterThan(g.dropped[.replaced] ?? 0, 100)
    }

    func testSilentLinksLeaveAndAnEmptyGroupCloses() {
        var limits = Groups.Limits()
        limits.linkTimeout = 10
        var g = Self.groups(limits)
        let (_, group) = Self.register(&g, links: ["a", "b"])
        _ = Self.receive(&g, .keepalive, from: "a", at: 8)
        XCTAssertEqual(g.expire(now: 10.5), [])
        XCTAssertEqual(g.groups[group]?.links.map(\.peer), ["a"], "b silent 10 s: dropped, a goes on")
        XCTAssertEqual(Self.receive(&g, .srtData(sequence: 1), from: "b", at: 11), [.drop(.unknownPeer)])
        XCTAssertEqual(g.expire(now: 18.5), [.closed(group: group)])
        XCTAssertNil(g.groups[group])
        // A REG1 whose group no link ever joined is forgotten too.
        _ = Self.receive(&g, .reg1(id: Self.senderID(9)), from: "c", at: 20)
        XCTAssertEqual(g.expire(now: 30.5).count, 1)
        XCTAssertTrue(g.groups.isEmpty)
    }
}
