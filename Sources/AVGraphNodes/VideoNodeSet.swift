import AVGraph

enum VideoNodeSet {
    nonisolated(unsafe) static let all: [any Node.Type] = [
        TestsrcNode.self,
        RawvideoNode.self,
        OrientNode.self,
        ResizeNode.self,
        PrivacyNode.self,
        FpsNode.self,
    ]
}
