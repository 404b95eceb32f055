import AVGraph
import Foundation

/// One connection of a live sink to its server, as `LiveSender` drives it: RTMP through
/// avgraph's own client (`RtmpLiveSession`), SRT through libavformat (`MuxerLiveSession`).
/// Made per session: a reconnect makes a new one (a fresh header, as servers expect).
protocol LiveSession: AnyObject {
    /// The socket the stream leaves by, for reading how the uplink copes; valid until `finish` or `close`.
    var uplinkSocket: UplinkSocket? { get }
    /// Sends `packet` of input `input`; blocks while the network is slower than the stream.
    func write(_ packet: Packet, input: Int) throws
    /// Ends the session cleanly and hangs up.
    func finish() throws
    /// Hangs up at once (the connection is broken, or the run ends).
    func close()
}

/// Which session a live sink's sender opens.
enum LiveSessionKind: Sendable {
    /// libavformat's muxer and protocol (`srt://`).
    case muxer
    /// avgraph's RTMP client; `trustedCertificates`: PEM file trusted for `rtmps://` instead of the system's store.
    case rtmp(trustedCertificates: String?)
}

/// The server cannot take what the sink sends (HEVC to a server that listed its codecs without
/// it): trying again cannot help, so the run fails at once with this.
struct LiveSessionRefused: Error, CustomStringConvertible {
    var description: String
}
