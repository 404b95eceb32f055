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
}
