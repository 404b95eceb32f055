import AVGraph
import Foundation
import NIOCore

/// The client's end of the pipeline, on the channel's loop: the server's bytes into the
/// session, the session's answers out, and what the sender waits for (writability, the end).
final class RtmpClientHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private let shared: ConditionLock<RtmpClient.State>

    init(_ shared: ConditionLock<RtmpClient.State>) { self.shared = shared }

    func channelActive(context: ChannelHandlerContext) {
        Self.flush(context.channel, shared)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        shared.withLockWakingAll { s in buffer.withUnsafeReadableBytes { s.session.receive($0) } }
        Self.flush(context.channel, shared)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        let writable = context.channel.isWritable
        shared.withLockWakingAll { $0.writable = writable }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        shared.withLockWakingAll { s in if s.ended == nil { s.ended = "the server closed the connection" } }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        let why = (error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(error)"
        shared.withLockWakingAll { s in if s.ended == nil { s.ended = why } }
        context.close(promise: nil)
    }

    /// Writes what the session has to send; on the loop.
    static func flush(_ channel: Channel, _ shared: ConditionLock<RtmpClient.State>) {
        let bytes = shared.withLock { s -> [UInt8] in
            let out = s.session.output
            s.session.output = []
            s.handed += out.count
            return out
        }
        guard !bytes.isEmpty else { return }
        let n = bytes.count
        channel.writeAndFlush(channel.allocator.buffer(bytes: bytes)).whenComplete { _ in
            shared.withLockWakingAll { $0.written += n }
        }
    }
}
