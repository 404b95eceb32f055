import Synchronization

/// The node types a pipeline can use: the built-ins plus any loaded from plugins.
///
/// One type name may have two roles, as `file` does: a source (no `in:`)
/// and a sink (with `in:`). The checker picks the variant from whether the node has inputs.
public final class NodeRegistry: Sendable {
    private struct Types {
        var variants: [String: [any Node.Type]] = [:]
        var origins: [String: String] = [:]
        var eventKinds: [String: any NodeEvent.Type] = [:]
    }
    /// Plugins register while other threads may look types up.
    private let types = Mutex(Types())
    public var variants: [String: [any Node.Type]] { types.withLock { $0.variants } }
    /// Where each type came from (`built-in` or a plugin file).
    public var origins: [String: String] { types.withLock { $0.origins } }
    /// The event kinds the types declare, by `event` name (several types may share one kind).
    public var eventKinds: [String: any NodeEvent.Type] { types.withLock { $0.eventKinds } }

    public init() {}

    public enum RegistrationError: Error, CustomStringConvertible {
        case duplicate(String, first: String)
        case role(String, String)
        case eventKind(String, String)
        public var description: String {
            switch self {
            case .duplicate(let t, let first): return "node type '\(t)' is already registered by \(first)"
            case .role(let t, let problem): return "node type '\(t)' \(problem)"
            case .eventKind(let t, let problem): return "node type '\(t)' declares \(problem)"
            }
        }
    }

    public func register(_ type: any Node.Type, origin: String = "built-in") throws {
        let name = type.typeName
        if let problem = Self.roleProblem(type) { throw RegistrationError.role(name, problem) }
        if let problem = eventProblem(type) { throw RegistrationError.eventKind(name, problem) }
        for kind in type.events { EventCatalog.note(kind) }
        try types.withLock { t in
            for kind in type.events { t.eventKinds[kind.eventName] = kind }
            if let existing = t.variants[name] {
                // A second role is welcome only if it is the other role (source vs. consumer) from the same origin.
                let clash = existing.contains { ($0.role == .source) == (type.role == .source) } || t.origins[name] != origin
                if clash { throw RegistrationError.duplicate(name, first: t.origins[name] ?? "?") }
                t.variants[name]!.append(type)
                return
            }
            t.variants[name] = [type]
            t.origins[name] = origin
        }
    }

    /// Why the type's pads do not fit its role, or nil when they do.
    static func roleProblem(_ type: any Node.Type) -> String? {
        switch type.role {
        case .none: return "derives from none of Source, Filter and Sink"
        case .source where !type.inputs.isEmpty: return "is a Source but declares inputs"
        case .source where type.outputs.isEmpty: return "is a Source but declares no outputs"
        case .filter where type.inputs.isEmpty || type.outputs.isEmpty: return "is a Filter but lacks inputs or outputs (a Source has no inputs, a Sink no outputs)"
        case .sink where type.inputs.isEmpty: return "is a Sink but declares no inputs"
        case .sink where !type.outputs.isEmpty: return "is a Sink but declares outputs (a Filter emits)"
        default: return nil
        }
    }

    /// Why the type's event kinds cannot join this registry's, or nil when they can: a name is
    /// the runtime's own, or another Swift type's of an earlier node type (a line must decode one way).
    func eventProblem(_ type: any Node.Type) -> String? {
        for kind in type.events {
            let name = kind.eventName
            if Event.Kind.coreKinds.contains(where: { $0.type.eventName == name }) {
                return "event kind '\(name)', which is one of the runtime's own"
            }
            if name.isEmpty || name.first?.isLowercase != true || !name.allSatisfy({ $0.isLowercase || $0.isNumber || $0 == "_" || $0 == "-" }) {
                return "event kind '\(name)': a name is lower-case letters, digits, '_' and '-'"
            }
            if let known = eventKinds[name], known != kind {
                return "event kind '\(name)' as \(kind), but '\(emitters(of: name).first ?? "?")' declares it as \(known)"
            }
        }
        return nil
    }

    /// The node types that declare the event kind `name`.
    public func emitters(of name: String) -> [String] {
        names.filter { n in variants[n]!.contains { t in t.events.contains { $0.eventName == name } } }
    }

    /// The type for a node that has inputs (`in:`) or not.
    public func resolve(_ name: String, hasInputs: Bool) -> (any Node.Type)? {
        guard let v = variants[name] else { return nil }
        return v.first { ($0.role != .source) == hasInputs } ?? v.first
    }

    /// A registry of its own with the same types and origins (a `.pipe`'s plugins go into a copy).
    public func copy() -> NodeRegistry {
        let r = NodeRegistry()
        let copied = types.withLock { $0 }
        r.types.withLock { $0 = copied }
        return r
    }

    /// Where the type `name` came from: `built-in` or a plugin file's path.
    public func origin(of name: String) -> String? { origins[name] }

    public subscript(_ name: String) -> (any Node.Type)? { variants[name]?.first }
    public var names: [String] { variants.keys.sorted() }
}
