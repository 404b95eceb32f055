/// The node types a pipeline can use: the built-ins plus any loaded from plugins.
public final class NodeRegistry: @unchecked Sendable {
    public private(set) var types: [String: any Node.Type] = [:]
    /// Where each type came from (`built-in` or a plugin file).
    public private(set) var origins: [String: String] = [:]

    public init() {}

    public enum RegistrationError: Error, CustomStringConvertible {
        case duplicate(String, first: String)
        public var description: String {
            switch self {
            case .duplicate(let t, let first): return "node type '\(t)' is already registered by \(first)"
            }
        }
    }

    public func register(_ type: any Node.Type, origin: String = "built-in") throws {
        if let first = origins[type.typeName] { throw RegistrationError.duplicate(type.typeName, first: first) }
        types[type.typeName] = type
        origins[type.typeName] = origin
    }

    public subscript(_ name: String) -> (any Node.Type)? { types[name] }
    public var names: [String] { types.keys.sorted() }
}
