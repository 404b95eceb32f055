/// A connection avgraph holds itself that a `NetworkMuxer` writes its container into (the `srt`
/// sink's libsrt socket), instead of a protocol libavformat opens. Called on the muxer's thread only.
public protocol MuxerTransport: AnyObject {
    /// Sends `bytes` (at most the muxer's packet size, whole container packets) as one message;
    /// throws when the peer is gone, takes nothing for the timeout, or the send is cancelled.
    func send(_ bytes: UnsafeRawBufferPointer) throws
    /// The socket, for reading how the uplink copes (`srt_bstats`); nil once closed.
    var uplinkSocket: UplinkSocket? { get }
    /// Hangs up: `graceful` after a clean end (what was sent may still leave, within the
    /// transport's linger), otherwise at once (the session is broken or cancelled).
    func close(graceful: Bool)
}
