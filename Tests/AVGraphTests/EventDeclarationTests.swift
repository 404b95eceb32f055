import AVGraph
import Foundation
import XCTest

/// A node type's event kinds join a registry only when each name means one struct: not one of
/// the runtime's own kinds, not another type's kind under the same name; and a declared kind's
/// line reads back as its struct.
final class EventDeclarationTests: XCTestCase {
    struct Ping: NodeEvent {
        static let eventName = "ping"
        static let summary = "a ping"
        static let fields: [EventField] = [.integer("count")]
        static let example = Ping(count: 1)
        var count: Int
        var text: String { "ping \(count)" }
    }
    /// Another struct under the same name.
    struct OtherPing: NodeEvent {
        static let eventName = "ping"
        static let summary = "another ping"
        static let fields: [EventField] = [.string("word")]
        static let example = OtherPing(word: "x")
        var word: String
        var text: String { word }
    }
    /// A runtime kind's name.
    struct FakeStats: NodeEvent {
        static let eventName = "stats"
        static let summary = "not the run's stats"
        static let fields: [EventField] = []
        static let example = FakeStats()
        var text: String { "stats" }
    }
    struct Shouting: NodeEvent {
        static let eventName = "Ping Loudly"
        static let summary = "a name a line cannot carry"
        static let fields: [EventField] = []
        static let example = Shouting()
        var text: String { "PING" }
    }

    class Declaring: Sink {
        class var typeName: String { "pinger" }
        static let summary = "declares an event kind"
        static let inputs = [PadSpec("in", [.rawVideo])]
        static let options: [OptionSpec] = []
        static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] { [] }
        required init(_ setup: NodeSetup) throws {}
    }
    final class Pinger: Declaring, Node { static let events: [any NodeEvent.Type] = [Ping.self] }
    final class SecondPinger: Declaring, Node {
        override class var typeName: String { "second-pinger" }
        static let events: [any NodeEvent.Type] = [Ping.self]
    }
    final class OtherPinger: Declaring, Node {
        override class var typeName: String { "other-pinger" }
        static let events: [any NodeEvent.Type] = [OtherPing.self]
    }
    final class StatsFaker: Declaring, Node {
        override class var typeName: String { "stats-faker" }
        static let events: [any NodeEvent.Type] = [FakeStats.self]
    }
    final class Shouter: Declaring, Node {
        override class var typeName: String { "shouter" }
        static let events: [any NodeEvent.Type] = [Shouting.self]
    }

    func testAKindNameMeansOneStructAndNoneOfTheRuntimes() throws {
        let registry = NodeRegistry()
        try registry.register(Pinger.self)
        try registry.register(SecondPinger.self)
        XCTAssertEqual(registry.emitters(of: "ping"), ["pinger", "second-pinger"])
        XCTAssertThrowsError(try registry.register(OtherPinger.self)) { error in
            XCTAssertTrue("\(error)".contains("node type 'other-pinger' declares event kind 'ping' as OtherPing, but 'pinger' declares it as Ping"),
                          "\(error)")
        }
        XCTAssertThrowsError(try registry.register(StatsFaker.self)) { error in
            XCTAssertTrue("\(error)".contains("event kind 'stats', which is one of the runtime's own"), "\(error)")
        }
        XCTAssertThrowsError(try registry.register(Shouter.self)) { error in
            XCTAssertTrue("\(error)".contains("a name is lower-case letters, digits, '_' and '-'"), "\(error)")
        }
        XCTAssertNil(registry["other-pinger"])
        XCTAssertEqual(EventSchema.kinds(registry).map { $0.eventName }.filter { $0 == "ping" }, ["ping"])
    }

    func testADeclaredKindsLineIsFlatAndReadsBackAsItsStruct() throws {
        try NodeRegistry().register(Pinger.self)
        let line = Event(.node(Ping(count: 3)), node: "p", wall: 1.25).jsonLine
        XCTAssertEqual(line, #"{"count":3,"event":"ping","node":"p","wall":1.25}"#)
        let back = try Event.decode(line: line)
        XCTAssertEqual(back.kind.declared(Ping.self)?.count, 3)
        XCTAssertNil(back.kind.declared(OtherPing.self))
        XCTAssertEqual(back.text, "ping 3")
        XCTAssertEqual(back.severity, .info)
        XCTAssertThrowsError(try Event.decode(line: #"{"event":"pong","wall":1}"#))
    }

    /// A kind never declared nor emitted in this process (`echo`): a line of it, as a watcher of
    /// another process's run reads one, is kept as read, written back the same, and becomes the
    /// declaring struct on request.
    func testALineOfAKindThisProcessDoesNotKnowIsKeptAndReadableLater() throws {
        struct Echo: NodeEvent {
            static let eventName = "echo"
            static let summary = "an echo"
            static let fields: [EventField] = [.integer("count"), .number("media_time")]
            static let example = Echo(count: 1, mediaTime: 0)
            var count: Int
            var mediaTime: Double
            enum CodingKeys: String, CodingKey { case count, mediaTime = "media_time" }
            var text: String { "echo" }
        }
        let line = #"{"count":4,"event":"echo","media_time":2.5,"node":"n","wall":1}"#
        let back = try Event.decode(line: line)
        guard case .undeclared(let u) = back.kind else { return XCTFail("\(back.kind)") }
        XCTAssertEqual(u, UndeclaredEvent(name: "echo", fields: ["count": .int(4), "media_time": .number(2.5)]))
        XCTAssertEqual(back.kind.name, "echo")
        XCTAssertEqual(back.jsonLine, line)
        XCTAssertEqual(back.text, "echo: count=4 media_time=2.5")
        XCTAssertEqual(back.kind.declared(Echo.self)?.count, 4)
        XCTAssertEqual(back.kind.declared(Echo.self)?.mediaTime, 2.5)
        XCTAssertNil(back.kind.declared(Ping.self))
    }
}
