import AVGraphTransport
import CFuzzDriver
import Foundation

/// libFuzzer target: datagrams on an SRTLA port, from a handful of peers, at moving times,
/// through the receiver's bookkeeping (`SrtlaGroups`), with SRT replies routed back. Input: a
/// sequence of records `peer (1 byte) | clock step in 10 ms (1 byte) | length (2 bytes) | packet`.
/// Whatever comes, a link is in one group at most, limits hold, every ack is one word and ten
/// sequence numbers, and nothing traps.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzSrtla(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    var limits = SrtlaGroups<UInt8>.Limits()
    limits.linksPerGroup = 4
    limits.groups = 3
    limits.registrationsPerSecond = 20
    var groups = SrtlaGroups<UInt8>(limits: limits, randomHalf: { [UInt8](repeating: 0x5A, count: 128) })
    let input = UnsafeBufferPointer(start: bytes, count: count)
    var at = 0, now = 0.0
    while at + 4 <= input.count {
        let peer = input[at] % 8
        now += Double(input[at + 1]) / 100
        let length = min(Int(input[at + 2]) << 8 | Int(input[at + 3]), input.count - at - 4)
        let packet = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(input)[(at + 4)..<(at + 4 + length)])
        at += 4 + length
        for action in groups.receive(packet, from: peer, now: now) {
            if case .reply(_, let reply) = action, reply.first == 0x91 { precondition(reply.count == 44, "an SRTLA_ACK is 11 words") }
            if case .forward(let g) = action {
                precondition(groups.groups[g]?.links.contains { $0.peer == peer } == true, "forwarded for a peer not in the group")
                _ = groups.destinations(ofReply: packet, group: g)
            }
        }
        _ = groups.expire(now: now)
        precondition(groups.groups.count <= limits.groups, "more groups than the limit")
        var seen = Set<UInt8>()
        for g in groups.groups.values {
            precondition(g.links.count <= limits.linksPerGroup, "more links than the limit")
            for l in g.links { precondition(seen.insert(l.peer).inserted, "a link in two groups") }
        }
    }
    return 0
}

@_cdecl("FuzzSrtla_main")
public func fuzzSrtlaMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc, arguments = argv
    return LLVMFuzzerRunDriver(&count, &arguments) { fuzzSrtla($0!, $1) }
}
