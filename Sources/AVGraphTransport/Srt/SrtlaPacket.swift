/// SRTLA's packets (BELABOX srtla v2, as its sender and receiver exchange them) and the few
/// facts of SRT's header a bonding receiver needs. Each SRTLA packet starts with a 16-bit
/// big-endian type; anything else on the port is SRT.
package enum SrtlaPacket: Equatable, Sendable {
    /// The sender's 256-byte id: the group's first half is the sender's, the second the receiver's.
    package static let idLength = 256
    package static let keepaliveType: UInt16 = 0x9000
    package static let ackType: UInt16 = 0x9100
    package static let reg1Type: UInt16 = 0x9200
    package static let reg2Type: UInt16 = 0x9201
    package static let reg3Type: UInt16 = 0x9202
    package static let regErrorType: UInt16 = 0x9210
    package static let regNoGroupType: UInt16 = 0x9211
    package static let regRefusedType: UInt16 = 0x9212
    /// Sequence numbers an SRTLA_ACK carries: one ack each time a link has brought this many data packets.
    package static let ackedPerAck = 10

    /// A link's first packet: a new group with the sender's half of the id.
    case reg1(id: [UInt8])
    /// From the receiver: the group's whole id; from the sender, on each link: joining that group.
    case reg2(id: [UInt8])
    /// The receiver's yes to a link's REG2.
    case reg3
    /// Echoed unchanged on the link it came on (the sender measures the link's round trip by it).
    case keepalive
    case ack(sequences: [UInt32])
    /// Registration refused: a limit (REG_ERR), no such group (REG_NGP), or the id claimed by another sender (REG_NAK).
    case regError, regNoGroup, regRefused
    /// SRT's: `data` with its sequence number, or a control packet of `controlType`.
    case srtData(sequence: UInt32)
    case srtControl(type: UInt16)
    /// Too short for SRT, or an SRTLA type with the wrong length.
    case garbage

    /// What `bytes` are, without copying them (an id is copied out only for registrations).
    package init(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= 2 else {
            self = .garbage
            return
        }
        let type = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
        let idBytes = { Array(bytes[2..<(2 + Self.idLength)]) }
        switch type {
        case Self.reg1Type: self = bytes.count == 2 + Self.idLength ? .reg1(id: idBytes()) : .garbage
        case Self.reg2Type: self = bytes.count == 2 + Self.idLength ? .reg2(id: idBytes()) : .garbage
        case Self.reg3Type: self = .reg3
        case Self.keepaliveType: self = .keepalive
        case Self.regErrorType: self = .regError
        case Self.regNoGroupType: self = .regNoGroup
        case Self.regRefusedType: self = .regRefused
        case Self.ackType:
            guard bytes.count >= 4, (bytes.count - 4) % 4 == 0 else {
                self = .garbage
                return
            }
            self = .ack(sequences: stride(from: 4, to: bytes.count, by: 4).map { Self.word(bytes, at: $0) })
        default:
            // SRT's header is 16 bytes: the first bit tells control (1) from data (0).
            guard bytes.count >= 16 else {
                self = .garbage
                return
            }
            self = bytes[0] & 0x80 == 0 ? .srtData(sequence: Self.word(bytes, at: 0)) : .srtControl(type: type & 0x7FFF)
        }
    }

    /// SRT's control type of an ACK: the receiver's ACKs go back on every link, so each link's sender
    /// side learns what arrived whichever link brought it.
    package static let srtAckControlType: UInt16 = 0x0002

    package static func word(_ b: UnsafeRawBufferPointer, at i: Int) -> UInt32 {
        UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
    }

    /// The packet as the wire carries it.
    package var bytes: [UInt8] {
        func type(_ t: UInt16) -> [UInt8] { [UInt8(t >> 8), UInt8(t & 0xFF)] }
        func word(_ w: UInt32) -> [UInt8] { [UInt8(w >> 24), UInt8(w >> 16 & 0xFF), UInt8(w >> 8 & 0xFF), UInt8(w & 0xFF)] }
        switch self {
        case .reg1(let id): return type(Self.reg1Type) + id
        case .reg2(let id): return type(Self.reg2Type) + id
        case .reg3: return type(Self.reg3Type)
        case .keepalive: return type(Self.keepaliveType)
        case .regError: return type(Self.regErrorType)
        case .regNoGroup: return type(Self.regNoGroupType)
        case .regRefused: return type(Self.regRefusedType)
        case .ack(let sequences): return word(UInt32(Self.ackType) << 16) + sequences.flatMap(word)
        case .srtData(let sequence): return word(sequence & 0x7FFF_FFFF) + [UInt8](repeating: 0, count: 12)
        case .srtControl(let t): return type(0x8000 | t) + [UInt8](repeating: 0, count: 14)
        case .garbage: return [0]
        }
    }
}
