import Foundation

// What a node type tells the core about itself beyond pads and options, so that the core never
// reads a node's option by name nor knows a node type by name: each is a protocol the type adopts.

/// A source that ends by itself after an amount of media its options set (testsrc's `duration`).
/// The run stops it there, or at the pipeline's `duration` when that comes first.
public protocol EndsByItself {
    /// Seconds of media after which the node ends; nil (or 0) when it runs on.
    static func mediaDuration(_ options: OptionValues) -> Double?
}

/// A node whose output's bit rate its options bound (an encoder's `maxrate` or `bitrate`):
/// what `check` feeds to a downstream `HoldsMemory` node's estimate.
public protocol DeclaresBitrate {
    /// At most how many bits a second the node's output carries; nil when it cannot be told.
    static func bitrateCeiling(_ options: OptionValues) -> Int?
}

/// A node that answers control-socket commands of its own (the `clips` sink answers `clip`).
/// The socket routes a request whose `cmd` the type lists to the running instance; `answer` is
/// called on the node's own thread, between buffers, as a live change is (so it reads the node's
/// state without a lock; the control client waits up to 5 s for it).
public protocol AnswersControl: AnyObject {
    /// The commands this node type answers, each with its request's fields and its reply type
    /// (what `inspect --control-schema` and the operator page read); the socket refuses them when no node answers.
    static var controlCommands: [ControlCommandSpec] { get }
    /// Answers one request (its whole JSON line in `request`, to decode as the node's own type).
    func answer(_ request: NodeControlRequest) -> NodeControlAnswer
}

/// A request line routed to a node: decoded by the node as its own `Decodable` type.
public struct NodeControlRequest: Sendable {
    public let command: String
    public let line: Data

    public init(command: String, line: Data) {
        self.command = command
        self.line = line
    }

    public func decode<Request: Decodable>(_ type: Request.Type) throws -> Request {
        try JSONDecoder().decode(type, from: line)
    }
}

/// A node's answer: a typed reply body, or why it refused.
public enum NodeControlAnswer: Sendable {
    case done(any ControlReplyBody)
    case refused(String)
}

/// An encoder that can send a network source's own packets on in place of the pictures it meets
/// unchanged (`h264` and `h265` with `passthrough: auto`). Its stream takes the size of the
/// pictures the source sends, which the source's size only expects: `check` says so, and says
/// where a node on the way fixes the size instead (then every picture is encoded at it).
public protocol PassesSourcePackets {
    static func passesSourcePackets(_ options: OptionValues) -> Bool
}
