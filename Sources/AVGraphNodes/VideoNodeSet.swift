import AVGraph

enum VideoNodeSet {
    static let all: [any Node.Type] = []
}
