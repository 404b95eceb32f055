import AVGraph

enum AudioNodeSet {
    static let all: [any Node.Type] = []
}
