extension CheckedPipeline {
    /// `check`'s note on each encoder that passes a source's packets on (`PassesSourcePackets`):
    /// the size it shows for the pictures is only the source's expectation, the stream takes the
    /// size the source sends; or, where a node on the way fixes the size (a `resize`), every
    /// picture is encoded at that size. (A ladder, whose renditions need fixed sizes, is the
    /// `hls` sink's own refusal.)
    func passthroughSizeNotes() -> [Diagnostic] {
        let index = Dictionary(nodes.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { a, _ in a })
        return nodes.compactMap { node -> Diagnostic? in
            guard let type = node.type as? any PassesSourcePackets.Type, type.passesSourcePackets(node.options),
                  let input = node.inputs.first, let f = input.format, f.kind == .rawVideo else { return nil }
            if f.sizeVaries {
                return Diagnostic(.note, at: node.location, "'\(node.name)' takes the size of the pictures the source sends "
                    + "(\(f.width)x\(f.height) is only the size expected): their packets pass through at it, a card is encoded at it, "
                    + "and a phone that turns is followed at each of its sizes")
            }
            // The node whose output has one size though its input's varies: what fixed it.
            var name = input.from
            var seen: Set<String> = []
            while let i = index[name], seen.insert(name).inserted {
                let up = nodes[i]
                if up.inputs.contains(where: { $0.format?.sizeVaries == true }) {
                    return Diagnostic(.note, at: node.location, "'\(up.name)' fixes the picture size (\(f.width)x\(f.height)), so '\(node.name)' "
                        + "encodes every picture at it: a source's pictures pass through only at the size they are sent in (without '\(up.name)')")
                }
                guard let next = up.inputs.first?.from else { break }
                name = next
            }
            return nil
        }
    }
}
