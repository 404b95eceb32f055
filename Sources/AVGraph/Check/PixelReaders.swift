extension CheckedPipeline {
    /// Whether the pictures of `node`'s output `output` may go out without pixels (see
    /// `NodeSetup.pixelsOnRequest`): no node they reach reads every picture's pixels, following
    /// each raw video output of the nodes on the way (one may pass the pictures on as they came).
    /// An output nothing reads qualifies; the preview decodes what it shows itself.
    func pixelsOnRequest(node: String, output: Int) -> Bool {
        mediaOnRequest(node: node, output: output, kind: .rawVideo) { $0.readsPixels(input: $1, options: $2) }
    }

    /// The same for audio frames without samples (`NodeSetup.samplesOnRequest`, `Node.readsSamples`).
    func samplesOnRequest(node: String, output: Int) -> Bool {
        mediaOnRequest(node: node, output: output, kind: .rawAudio) { $0.readsSamples(input: $1, options: $2) }
    }

    private func mediaOnRequest(node: String, output: Int, kind: MediaKind,
                                reads: (any Node.Type, Int, OptionValues) -> Bool) -> Bool {
        var visited: Set<String> = []
        let consumers = consumerIndex()
        func onRequest(_ node: String, _ output: Int) -> Bool {
            guard visited.insert("\(node).\(output)").inserted else { return true }
            for (consumer, i) in consumers.of(node, output) {
                // An `orient` whose tag is carried as a display matrix turns nothing (it loads
                // the pixels of the few pictures it must turn: a change of orientation).
                let turnsNothing = kind == .rawVideo
                    && consumer.type.orientationHandling(input: i, options: consumer.options) == .turns
                    && orientationCarried(node: consumer.name, output: 0, consumers: consumers)
                if reads(consumer.type, i, consumer.options) && !turnsNothing { return false }
                for (o, format) in consumer.outputs.enumerated() where format.kind == kind {
                    if !onRequest(consumer.name, o) { return false }
                }
            }
            return true
        }
        return onRequest(node, output)
    }
}
