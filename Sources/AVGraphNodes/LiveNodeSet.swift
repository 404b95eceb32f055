import AVGraph

/// Live network sinks and sources.
enum LiveNodeSet {
    static var all: [any Node.Type] { [RtmpNode.self, SrtNode.self, RtmpSourceNode.self, SrtSourceNode.self, WhipSourceNode.self, PublisherSourceNode.self, WhepNode.self] }
}
