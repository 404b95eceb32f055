import AVGraph
import AVGraphServe
import Synchronization
import XCTest

/// The hooks' queue with a transport of the test's own: sessions are lanes, so a receiver that
/// fails one session's events holds back only that session; an unreadable file is moved aside.
final class HookQueueTests: XCTestCase {
    /// What the transport was given, and which sessions it fails.
    final class Receiver: Sendable {
        let failing: Set<String>
        private let got = ConditionLock<[JSONObject]>([])
        /// The events tried, by session.
        let attempts = Mutex<[String: [String]]>([:])
        init(failing: Set<String> = []) { self.failing = failing }

        var transport: HookQueue.Transport {
            { [self] body, headers, done in
                let object = ServeJSON.object(body) ?? [:]
                let session = object["session"]?.text ?? ""
                attempts.withLock { $0[session, default: []].append(object["event"]?.text ?? "") }
                XCTAssertTrue(headers["X-Avgraph-Signature"]?.hasPrefix("sha256=") == true)
                XCTAssertEqual(headers["X-Avgraph-Delivery"]?.count, 36)
                if failing.contains(session) { return done(.init(delivered: false, described: "status 500")) }
                got.withLockWakingAll { $0.append(object) }
                done(.init(delivered: true, described: "status 204"))
            }
        }

        /// Waits up to `seconds` for `count` delivered bodies.
        func delivered(_ count: Int, within seconds: Double) -> [JSONObject] {
            got.wait(until: Monotonic.now + seconds) { $0.count >= count ? $0 : nil } ?? got.withLock { $0 }
        }
    }

    private func hook(_ session: String, _ event: String, _ n: Int = 0) -> JSONObject {
        SessionIdentity(id: session, key: "k-" + session, app: "live", scheme: "rtmp", peer: "p").hook(event, ["n": .int(n)])
    }

    func testOneSessionsFailingReceiverHoldsBackOnlyThatSession() throws {
        let folder = NSTemporaryDirectory() + "hooks-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let receiver = Receiver(failing: ["sbad"])
        let queue = try HookQueue(folder: folder, secret: Array("x".utf8), log: ServeLog { _ in }, transport: receiver.transport)
        queue.start()
        let began = Monotonic.now
        queue.post(hook("sbad", "publish"), session: "sbad")
        queue.post(hook("sbad", "unpublish"), session: "sbad")
        for (i, event) in ["publish", "unpublish", "recording"].enumerated() { queue.post(hook("sgood", event, i), session: "sgood") }
        let got = receiver.delivered(3, within: 3)
        XCTAssertLessThan(Monotonic.now - began, 3)
        XCTAssertEqual(got.map { $0["event"]?.text }, ["publish", "unpublish", "recording"], "the good session's events, in order")
        XCTAssertTrue(got.allSatisfy { $0["session"] == .string("sgood") })
        XCTAssertEqual(queue.waiting, ["sbad": 2], "the failing session's events wait on disk")
        XCTAssertEqual(Set(receiver.attempts.withLock { $0["sbad"] } ?? []), ["publish"], "its second waits behind its first")
        queue.finish(within: 0)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }.count, 2)
    }

    func testAnUnreadableFileIsMovedAsideWithAWarningAndNotRetried() throws {
        let folder = NSTemporaryDirectory() + "hooks-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let bad = HookFile(nanoseconds: 1, counter: 1, session: "s1", delivery: UUID().uuidString.lowercased())
        try Data("{not json".utf8).write(to: URL(fileURLWithPath: folder + "/" + bad.name))
        let warnings = ConditionLock<[String]>([])
        let receiver = Receiver()
        let queue = try HookQueue(folder: folder, secret: [], log: ServeLog { line in warnings.withLock { $0.append(line) } },
                                  transport: receiver.transport)
        queue.start()
        queue.post(hook("s1", "unpublish"), session: "s1")
        XCTAssertEqual(receiver.delivered(1, within: 3).map { $0["event"]?.text }, ["unpublish"], "the next one goes")
        queue.finish(within: 1)
        XCTAssertEqual(receiver.attempts.withLock { $0 }, ["s1": ["unpublish"]], "the unreadable one is never sent")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder + "/unreadable"), [bad.name])
        XCTAssertEqual(warnings.withLock { $0 }.filter { $0.contains("warning: hook \(bad.delivery)") && $0.contains("moved aside") }.count, 1,
                       "\(warnings.withLock { $0 })")
    }

    func testWhatAnEarlierServeLeftIsDeliveredOldFilesIncluded() throws {
        let folder = NSTemporaryDirectory() + "hooks-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        // An older serve's name: no session in it.
        let old = String(format: "%019llu-%06d-%@.json", UInt64(5), 1, UUID().uuidString.lowercased())
        try ServeJSON.encode(hook("s0", "recording")).write(to: URL(fileURLWithPath: folder + "/" + old))
        let mine = HookFile(nanoseconds: 6, counter: 2, session: "s9", delivery: UUID().uuidString.lowercased())
        try ServeJSON.encode(hook("s9", "publish")).write(to: URL(fileURLWithPath: folder + "/" + mine.name))
        let receiver = Receiver()
        let queue = try HookQueue(folder: folder, secret: [], log: ServeLog { _ in }, transport: receiver.transport)
        queue.start()
        XCTAssertEqual(Set(receiver.delivered(2, within: 3).compactMap { $0["session"]?.text }), ["s0", "s9"])
        queue.finish(within: 1)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }, [])
    }

    func testNamesSortInOrderAndSayTheirSession() throws {
        let a = HookFile(nanoseconds: 10, counter: 1, session: "s-1/x", delivery: String(repeating: "a", count: 36))
        let b = HookFile(nanoseconds: 10, counter: 2, session: "s-1/x", delivery: String(repeating: "b", count: 36))
        XCTAssertLessThan(a, b)
        XCTAssertEqual(a.session, "s_1_x", "a session's part has no '-'")
        XCTAssertEqual(a.delivery, String(repeating: "a", count: 36))
        XCTAssertEqual(a.queuedAt, 10e-9, accuracy: 1e-12)
        XCTAssertEqual(HookFile(name: a.name), a)
        let old = try XCTUnwrap(HookFile(name: String(format: "%019llu-%06d-%@.json", UInt64(5), 1, String(repeating: "c", count: 36))))
        XCTAssertEqual(old.session, "")
        XCTAssertEqual(old.delivery, String(repeating: "c", count: 36))
        XCTAssertNil(HookFile(name: "x.json.tmp"))
        XCTAssertNil(HookFile(name: "notes.txt"))
    }

    func testTheBodyCarriesTheSessionsFieldsTyped() throws {
        let body = SessionIdentity(id: "s1", key: "k", app: "live", scheme: "srt", peer: "1.2.3.4:5")
            .hook("publish", ["resumed": .bool(false)], at: Date(timeIntervalSince1970: 0))
        XCTAssertEqual(String(decoding: ServeJSON.encode(body), as: UTF8.self),
                       #"{"app":"live","event":"publish","key":"k","peer":"1.2.3.4:5","protocol":"srt","resumed":false,"session":"s1","time":"1970-01-01T00:00:00.000Z"}"#)
    }
}
