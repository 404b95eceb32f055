import AVGraph
import CFFmpeg

/// Where a network source's compressed packets come from: libavformat's demuxer (SRT's MPEG-TS,
/// a pulled stream), or avgraph's own FLV tag reader (its RTMP server's publishers).
package protocol PacketSource: AnyObject {
    /// The stream of `type` to decode, or nil when there is none.
    func bestStream(_ type: AVMediaType) -> Int?
    func parameters(_ stream: Int) -> UnsafePointer<AVCodecParameters>
    func timeBase(_ stream: Int) -> Rational
    /// How the stream's pictures are to be turned upright (a display matrix), `.up` without one.
    func orientation(_ stream: Int) -> Orientation
    /// The next packet into `packet`; false at the end.
    func read(into packet: UnsafeMutablePointer<AVPacket>) throws -> Bool
    /// When (monotonic) the media at the stream's first time arrived, when that was before the
    /// source could be read (WHIP holds its first media for lip sync): the session is laid on the
    /// clock from there, not from the reading, so the hold does not last the whole session.
    var startedAt: Double? { get }
}

extension PacketSource {
    package var startedAt: Double? { nil }
}
