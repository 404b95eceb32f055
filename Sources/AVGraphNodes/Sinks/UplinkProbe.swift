import AVGraph
import CSrt
import Foundation

/// What the transport under a live sink knows of its uplink: bytes it holds unsent, the rate it
/// delivers at, the round trip. TCP (rtmp://) from the kernel's TCP_INFO, SRT from libsrt's
/// srt_bstats. Read from the node's thread while the sender thread writes: both calls are safe
/// on a socket in use.
enum UplinkProbe {
    struct Figures: Equatable {
        /// Bytes written to the socket that have not left yet (TCP: not even sent once; SRT: not acknowledged).
        var unsentBytes: Int
        /// Bit/s the transport delivers (TCP's delivery rate, SRT's bandwidth estimate); nil when
        /// unknown or measured while the sender had nothing to send (then it says nothing of the link).
        var deliveredBits: Int?
        var roundTrip: Double?
    }

    static func read(_ socket: UplinkSocket) -> Figures? {
        switch socket {
        case .tcp(let fd): return tcp(fd)
        case .srt(let fd): return srt(fd)
        }
    }

    /// Offsets in Linux's `struct tcp_info` (uapi: fields are only ever appended, so they hold
    /// on every kernel that has them: delivery rate since 4.9). Glibc's header stops before them.
    private enum TcpInfo {
        static let appLimitedByte = 7
        static let roundTrip = 68
        static let notSent = 144
        static let deliveryRate = 160
        static let size = 168
    }

    private static func tcp(_ fd: Int32) -> Figures? {
        var raw = [UInt8](repeating: 0, count: 232)
        var length = socklen_t(raw.count)
        let r = raw.withUnsafeMutableBytes { getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, $0.baseAddress, &length) }
        guard r == 0, Int(length) >= TcpInfo.size else { return nil }
        func field<T: FixedWidthInteger>(_ offset: Int, _: T.Type) -> T {
            raw.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: T.self) }
        }
        let appLimited = raw[TcpInfo.appLimitedByte] & 1 != 0
        let rate = field(TcpInfo.deliveryRate, UInt64.self)
        return Figures(unsentBytes: Int(field(TcpInfo.notSent, UInt32.self)),
                       deliveredBits: appLimited || rate == 0 ? nil : Int(clamping: rate &* 8),
                       roundTrip: Double(field(TcpInfo.roundTrip, UInt32.self)) / 1e6)
    }

    private static func srt(_ fd: Int32) -> Figures? {
        var stats = SRT_TRACEBSTATS()
        guard srt_bstats(fd, &stats, 0) == 0 else { return nil }
        return Figures(unsentBytes: Int(stats.byteSndBuf),
                       deliveredBits: stats.mbpsBandwidth > 0 ? Int(stats.mbpsBandwidth * 1e6) : nil,
                       roundTrip: stats.msRTT > 0 ? stats.msRTT / 1000 : nil)
    }
}
