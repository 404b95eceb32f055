import AVGraph

enum VideoNodeSet {
    static let all: [any Node.Type] = [
        TestsrcNode.self,
        RawvideoNode.self,
        OrientNode.self,
        ResizeNode.self,
        PrivacyNode.self,
        FpsNode.self,
    ]
}
