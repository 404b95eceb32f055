import AVGraphTransport
import Foundation
import NIOCore
import NIOPosix

/// An HTTP server of a run (`--http`, `--metrics`) on the process's NIO event loops (HTTP/1.1; over TLS HTTP/2 too): a
/// listening socket whose connections the service sets up and answers.
public final class HTTPServer: Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Where it listens: the port the system chose when asked for port 0.
    public let address: HTTPAddress
    public let service: HTTPService
    private let channel: any Channel

    /// Listens at once; `name` starts the message when it cannot (`metrics: cannot listen on ...`).
    public init(_ address: HTTPAddress, name: String, service: HTTPService) throws {
        self.service = service
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in channel.eventLoop.makeCompletedFuture { try service.configure(channel) } }
        do {
            channel = try bootstrap.bind(to: try SocketAddress(ipAddress: address.host, port: Int(address.port))).wait()
        } catch {
            let why = (error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(error)"
            throw Failure(description: "\(name): cannot listen on \(address.authority): \(why)")
        }
        var bound = address
        if let port = channel.localAddress?.port { bound.port = UInt16(port) }
        self.address = bound
    }

    public var scheme: String { service.scheme }

    /// Stops listening and closes every connection (event streams end); returns when all are closed.
    public func close() {
        try? channel.close().wait()
        try? service.connections.closeAll(on: channel.eventLoop).wait()
    }
}
