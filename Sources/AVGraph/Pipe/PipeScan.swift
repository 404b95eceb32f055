import CYaml

/// A pass over the file's YAML events (libyaml's parser, which keeps its own stacks and never
/// recurses) before anything builds a tree: it refuses what would make building the tree blow
/// up — nesting deeper than `PipeLoader.maxDepth` (Yams composes recursively), anchors and aliases
/// (an aliased node is shared by Yams and copied by us, and hashed whole as a mapping key: a few
/// hundred bytes of aliases of aliases expand into gigabytes). A syntax error stops the pass
/// quietly: the composer then reports it with its context.
enum PipeScan {
    static func refusal(_ text: String, file: String) -> Diagnostic? {
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else { return nil }
        defer { yaml_parser_delete(&parser) }
        var utf8 = Array(text.utf8)
        return utf8.withUnsafeMutableBufferPointer { buffer -> Diagnostic? in
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            var depth = 0
            while true {
                var event = yaml_event_t()
                guard yaml_parser_parse(&parser, &event) == 1 else { return nil }
                defer { yaml_event_delete(&event) }
                let at = SourceLocation(file: file, line: Int(event.start_mark.line) + 1, column: Int(event.start_mark.column) + 1)
                var anchor: UnsafeMutablePointer<yaml_char_t>?
                switch event.type {
                case YAML_STREAM_END_EVENT:
                    return nil
                case YAML_ALIAS_EVENT:
                    anchor = event.data.alias.anchor
                case YAML_SCALAR_EVENT:
                    anchor = event.data.scalar.anchor
                case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
                    anchor = event.type == YAML_SEQUENCE_START_EVENT ? event.data.sequence_start.anchor : event.data.mapping_start.anchor
                    depth += 1
                    if depth > PipeLoader.maxDepth {
                        return .error(at, "nesting is deeper than \(PipeLoader.maxDepth) levels",
                                      hint: "a .pipe file needs only a few levels: nodes, options, schedules")
                    }
                case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                    depth -= 1
                default:
                    break
                }
                if let anchor {
                    let name = PipeValue.quoted(String(cString: anchor))
                    let what = event.type == YAML_ALIAS_EVENT ? "alias *" : "anchor &"
                    return .error(at, "YAML \(what)\(name.dropFirst().dropLast()) is not supported: a .pipe file has no anchors or aliases",
                                  hint: "write the value out where it is used")
                }
            }
        }
    }
}
