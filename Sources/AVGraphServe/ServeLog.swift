import AVGraph
import Foundation

/// Where serve's lines go: stderr in the program, a collector in the unit tests.
public struct ServeLog: Sendable {
    public let write: @Sendable (String) -> Void

    public init(_ write: @escaping @Sendable (String) -> Void) { self.write = write }

    public static let stderr = ServeLog { _ = StandardStreams.write($0 + "\n", to: STDERR_FILENO) }

    /// `avgraph serve: TEXT`.
    public func say(_ text: String) { write("avgraph serve: " + text) }
    /// `avgraph serve: warning: TEXT`.
    public func warn(_ text: String) { write("avgraph serve: warning: " + text) }
}
