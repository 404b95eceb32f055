import AVGraph

/// Every node type that ships with avgraph.
public enum BuiltinNodes {
    public static var all: [any Node.Type] { VideoNodeSet.all + AudioNodeSet.all + IONodeSet.all + [ClipsNode.self] + LiveNodeSet.all + CaptureNodeSet.all }

    public static func registry() -> NodeRegistry {
        let r = NodeRegistry()
        for t in all { try? r.register(t) }
        return r
    }
}
