import AVGraph

/// Every node type that ships with avgraph.
public enum BuiltinNodes {
    public static var all: [any Node.Type] { VideoNodeSet.all + AudioNodeSet.all + IONodeSet.all + [ClipsNode.self] + LiveNodeSet.all + CaptureNodeSet.all }

    public static func registry() -> NodeRegistry {
        let r = NodeRegistry()
        for t in all {
            // Two built-ins of one name and role is a bug of this library: the registry test catches it.
            do { try r.register(t) } catch { preconditionFailure("built-in node set: \(error)") }
        }
        return r
    }
}
