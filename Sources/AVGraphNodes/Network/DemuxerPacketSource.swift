import AVGraph
import AVGraphTransport
import CFFmpeg

/// libavformat's demuxer as a network source's packets (SRT's MPEG-TS, a pulled stream).
extension Demuxer: PacketSource {
    package func parameters(_ stream: Int) -> UnsafePointer<AVCodecParameters> { UnsafePointer(self.stream(stream).pointee.codecpar) }
    package func timeBase(_ stream: Int) -> Rational { Rational(self.stream(stream).pointee.time_base) }
    package func orientation(_ stream: Int) -> Orientation { FileProbe.orientation(of: self.stream(stream)) }
}
