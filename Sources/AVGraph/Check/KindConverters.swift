extension NodeRegistry {
    /// A registered type with one input taking what `from` gives and an output of a kind `to`
    /// takes (an encoder between raw media and a sink): `check`'s hint for a kind mismatch.
    func converter(from: Set<MediaKind>, to: Set<MediaKind>) -> String? {
        names.first { name in
            guard let t = self[name], t.inputs.count == 1, !t.inputs[0].kinds.isDisjoint(with: from) else { return false }
            return t.outputs.contains { !$0.kinds.isDisjoint(with: to) && $0.kinds.isDisjoint(with: from) }
        }
    }
}
