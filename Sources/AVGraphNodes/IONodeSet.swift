import AVGraph

enum IONodeSet {
    static let all: [any Node.Type] = []
}
