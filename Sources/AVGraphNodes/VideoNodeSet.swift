import AVGraph

enum VideoNodeSet {
    nonisolated(unsafe) static let all: [any Node.Type] = [
        TestsrcNode.self,
        OrientNode.self,
    ]
}
