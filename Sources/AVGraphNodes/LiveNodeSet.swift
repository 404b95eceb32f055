import AVGraph

/// Live network sinks.
enum LiveNodeSet {
    static var all: [any Node.Type] { [RtmpNode.self, SrtNode.self] }
}
