import Foundation
import Synchronization

/// Which settings a node read that its `options` list does not declare. Such a setting reads its
/// default while `check` calls the user's value unknown, so the runtime, the harness and the
/// conformance verifier refuse the node type when it reads one (in `negotiate` or `init`).
public final class OptionAudit: Sendable {
    let declared: Set<String>
    private let unlisted = Mutex<[String]>([])

    public init(declared specs: [OptionSpec]) { declared = Set(specs.map(\.name)) }

    func note(_ name: String) {
        guard !declared.contains(name) else { return }
        unlisted.withLock { if !$0.contains(name) { $0.append(name) } }
    }

    /// The names read but not declared, in the order first read.
    public var undeclaredReads: [String] { unlisted.withLock { $0 } }

    /// The refusal for `type`, or nil when every setting it read is listed.
    public func refusal(_ type: any Node.Type) -> MediaError? {
        let names = undeclaredReads
        guard !names.isEmpty else { return nil }
        let quoted = names.map { "'\($0)'" }.joined(separator: ", ")
        return MediaError("node type '\(type.typeName)' reads option \(quoted) that its `options` list does not declare: add its `.spec` to \(type).options")
    }
}

extension Node {
    /// The node built from `setup`, refused (and aborted) when it read a setting its `options`
    /// list leaves out; reads made in `negotiate` count when the setup's options were audited there.
    public static func built(_ setup: NodeSetup) throws -> Self {
        var audited = setup
        let audit = setup.options.audit ?? OptionAudit(declared: options)
        audited.options.audit = audit
        let node = try Self(audited)
        if let refusal = audit.refusal(self) { node.abort(); throw refusal }
        return node
    }
}
