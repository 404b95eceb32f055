import AVGraph

enum IONodeSet {
    static var all: [any Node.Type] { [FileSourceNode.self, H264Node.self, FileSinkNode.self, NullNode.self, ScreenNode.self] }
}
