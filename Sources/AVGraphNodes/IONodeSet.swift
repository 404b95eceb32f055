import AVGraph

enum IONodeSet {
    static var all: [any Node.Type] { [FileSourceNode.self, H264Node.self, H265Node.self, FileSinkNode.self, HlsSinkNode.self, NullNode.self, ScreenNode.self] }
}
