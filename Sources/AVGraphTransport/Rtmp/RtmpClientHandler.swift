import AVGraph
import Foundation
import NIOCore

/// The client's end of the pipeline, on the channel's loop: the server's bytes into the
/// session, the session's answers out, and what the sender waits for (bytes written, the end).
package final class RtmpClientHandler: ChannelInboundHandler {
    package typealias InboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer
    private let shared: ConditionLock<RtmpClient.State>

    package init(_ shared: ConditionLock<RtmpClient.State>) { self.shared = shared }

    package func channelActive(context: ChannelHandlerContext) {
        Self.flush(context.channel, shared)
        context.fireChannelActive()
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        shared.withLockWakingAll { s in buffer.withUnsafeReadableBytes { s.session.receive($0) } }
        Self.flush(context.channel, shared)
    }

    package func channelInactive(context: ChannelHandlerContext) {
        shared.withLockWakingAll { s in if s.ended == nil { s.ended = "the server closed the connection" } }
        context.fireChannelInactive()
    }

    package func errorCaught(context: ChannelHandlerContext, error: Error) {
        let why = (error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(error)"
        shared.withLockWakingAll { s in if s.ended == nil { s.ended = why } }
        context.close(promise: nil)
    }

    /// Writes what the session has to send; on the loop.
    package static func flush(_ channel: Channel, _ shared: ConditionLock<RtmpClient.State>) {
        let bytes = shared.withLock { s -> [UInt8] in
            let out = s.session.output
            s.session.output = []
            s.handed += out.count
            return out
        }
        var at = 0
        while at < bytes.count {
            let n = min(RtmpClient.piece, bytes.count - at)
            channel.write(channel.allocator.buffer(bytes: bytes[at..<at + n])).whenComplete { _ in
                shared.withLockWakingAll { $0.written += n }
            }
            at += n
        }
        if !bytes.isEmpty { channel.flush() }
    }
}
