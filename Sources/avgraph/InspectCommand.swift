import ArgumentParser
import AVGraph
import Foundation

struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "List node types, or show one type's pads and options."
    )

    @Argument(help: "A node type to describe.")
    var type: String?

    enum OutputFormat: String, ExpressibleByArgument { case text, markdown }

    @Option(name: .long, help: "Output format: text, or markdown (every type: the page docs/NODES.md is made of).")
    var format: OutputFormat = .text

    @Flag(name: .long, help: "Print a JSON Schema of the .pipe format (every node type's options, plugins included) for editors.")
    var schema = false

    @Flag(name: .long, help: "Print the JSON Schema of the event lines (--events json): the runtime's kinds and every node type's, plugins included.")
    var eventsSchema = false
    @Flag(name: .long, help: "Print a JSON Schema of the control protocol's lines (every command's request and reply, node types' and plugins' commands included).")
    var controlSchema = false

    @OptionGroup var pluginOptions: PluginOptions

    func run() throws {
        let registry = try pluginOptions.registry()
        if schema || eventsSchema || controlSchema {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let data = try schema ? encoder.encode(PipeSchema.json(registry))
                : eventsSchema ? encoder.encode(EventSchema.json(registry)) : encoder.encode(ControlSchema.json(registry))
            print(String(decoding: data, as: UTF8.self))
            return
        }
        if format == .markdown {
            print(NodeReference.markdown(registry), terminator: "")
            return
        }
        guard let type else {
            let width = registry.names.map(\.count).max() ?? 8
            for name in registry.names {
                for t in registry.variants[name] ?? [] {
                    let role = t.role.rawValue
                    let pad = name.padding(toLength: width + 2, withPad: " ", startingAt: 0)
                    let origin = registry.origins[name].flatMap { $0 == "built-in" ? nil : " [plugin \($0)]" } ?? ""
                    print("\(pad)\(role.padding(toLength: 8, withPad: " ", startingAt: 0))\(t.summary)\(origin)")
                }
            }
            return
        }
        guard let variants = registry.variants[type] else {
            let hint = Suggest.hint(for: type, in: registry.names).map { " (\($0))" } ?? ""
            Terminal.err("error: unknown node type '\(type)'\(hint); `avgraph inspect` lists them")
            throw ExitCode(1)
        }
        for (i, t) in variants.enumerated() {
            if i > 0 { print("") }
            describe(t, origin: registry.origins[type] ?? "built-in", roles: variants.count)
        }
    }

    func describe(_ t: any Node.Type, origin: String, roles: Int) {
        let role = t.role.rawValue
        print("\(t.typeName) (\(role)\(roles > 1 ? ", used as a \(role) when it \(t.inputs.isEmpty ? "has no" : "has an") 'in:'" : "")) — \(t.summary)")
        print("from: \(origin)")
        print("\nInputs:")
        if t.inputs.isEmpty { print("  (none)") }
        for p in t.inputs {
            print("  \(p.name): \(p.kindsText)\(p.variadic ? ", any number" : "")\(p.required ? "" : ", optional")\(p.doc.isEmpty ? "" : " — \(p.doc)")")
        }
        print("\nOutputs:")
        if t.outputs.isEmpty { print("  (none)") }
        for p in t.outputs { print("  \(p.name): \(p.kindsText)\(p.doc.isEmpty ? "" : " — \(p.doc)")") }
        print("\nOptions:")
        if t.options.isEmpty { print("  (none)") }
        for o in t.options {
            var facts = ["type: \(o.type.name)"]
            if o.required { facts.append("required") } else { facts.append("default: \(o.defaultText ?? "none")") }
            if let r = o.type.rangeText { facts.append("range: \(r)") }
            if o.live { facts.append("live") }
            print("  \(o.name)  [\(facts.joined(separator: "; "))]")
            print("      \(o.doc)")
        }
        print("\nEvents (besides the runtime's own):")
        if t.events.isEmpty { print("  (none)") }
        for e in t.events {
            print("  \(e.eventName)  [\(e.fields.map { $0.required ? $0.name : $0.name + "?" }.joined(separator: ", "))]")
            print("      \(e.summary)")
        }
    }
}
