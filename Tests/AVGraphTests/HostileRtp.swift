import AVGraphTransport
import XCTest

/// Random RTP payloads for a depacketizer: sequence numbers with holes, timestamps repeating
/// for a few packets, a marker now and then. Nothing may trap; every frame stays within the
/// bound, and a damaged one is empty.
enum HostileRtp {
    /// Returns how many frames came out of `push`.
    static func frames(maxBytes: Int, packets: Int = 20000, _ push: (RtpPacket) -> [RtpVideoFrame]) -> Int {
        var generator = SystemRandomNumberGenerator()
        var frames = 0
        for n in 0..<packets {
            let payload = (0..<Int.random(in: 0...64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let p = RtpPacket(marker: n % 7 == 0, payloadType: 96, sequence: UInt16(truncatingIfNeeded: n / 3 * 3), timestamp: UInt32(n / 5),
                              ssrc: 1, payload: payload[...])
            for f in push(p) {
                frames += 1
                XCTAssertTrue(f.bytes.count <= maxBytes && !(f.damaged && !f.bytes.isEmpty))
            }
        }
        return frames
    }
}
