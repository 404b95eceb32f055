import AVGraph

enum AudioNodeSet {
    static var all: [any Node.Type] {
        [ToneNode.self, RawaudioNode.self, MixerNode.self, ResampleNode.self, MeterNode.self, AacNode.self, OpusNode.self]
    }
}
