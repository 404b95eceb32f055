import AVGraph

/// Sources fed from outside the pipeline: Swift code in the same process and producers on a socket.
enum CaptureNodeSet {
    static var all: [any Node.Type] { [AppSourceNode.self, SocketSourceNode.self] }
}
