import AVGraph
import AVGraphNodes
import Foundation
import XCTest

/// The socket framing (docs/INGEST.md): headers round-trip, every malformed field is refused,
/// and no byte sequence crashes the parser or the socket source.
final class IngestFramingTests: XCTestCase {
    func parse(_ bytes: [UInt8]) throws -> IngestFraming.Header {
        try bytes.withUnsafeBytes { try IngestFraming.parse($0) }
    }

    func problem(_ bytes: [UInt8]) -> IngestFraming.Problem? {
        do { _ = try parse(bytes); return nil } catch let p as IngestFraming.Problem { return p } catch { return nil }
    }

    func testHeadersRoundTrip() throws {
        for o in Orientation.allCases {
            let v = IngestFraming.Header.video(.nv12, width: 1170, height: 2532, timestamp: -123_456_789, orientation: o)
            XCTAssertEqual(try parse(IngestFraming.encode(v)), v)
        }
        XCTAssertEqual(IngestFraming.Header.video(.nv12, width: 1170, height: 2532, timestamp: 0, orientation: .up).payloadSize, 1170 * 2532 * 3 / 2)
        XCTAssertEqual(IngestFraming.Header.video(.bgra, width: 7, height: 5, timestamp: 0, orientation: .up).payloadSize, 140)
        let a = IngestFraming.Header.audio(.mic, format: .s16, rate: 44100, channels: 2, bigEndian: true, timestamp: 1 << 40, payloadSize: 4096)
        XCTAssertEqual(try parse(IngestFraming.encode(a)), a)
        let end = IngestFraming.Header(type: .end)
        XCTAssertEqual(try parse(IngestFraming.encode(end)), end)
        // The documented byte layout.
        let bytes = IngestFraming.encode(IngestFraming.Header.video(.nv12, width: 2, height: 2, timestamp: 1, orientation: .right))
        XCTAssertEqual(Array(bytes[0..<8]), [0x41, 0x56, 0x47, 0x49, 1, 1, 0, 0])
        XCTAssertEqual(bytes[8], 1)
        XCTAssertEqual(bytes[16], 6)  // payload 2*2 + 2
        XCTAssertEqual(bytes[20], 2)
        XCTAssertEqual(bytes[24], 2)
        XCTAssertEqual(bytes[28], 1)
        XCTAssertEqual(bytes[29], 6)  // EXIF 6 = right
    }

    func testMalformedHeadersAreRefused() {
        let video = IngestFraming.encode(.video(.nv12, width: 64, height: 32, timestamp: 0, orientation: .up))
        let audio = IngestFraming.encode(.audio(.app, format: .s16, rate: 48000, channels: 2, bigEndian: false, timestamp: 0, payloadSize: 4096))
        func mutate(_ b: [UInt8], _ at: Int, _ v: UInt8) -> [UInt8] { var c = b; c[at] = v; return c }
        XCTAssertEqual(problem(mutate(video, 0, 0x42)), .badMagic)
        XCTAssertEqual(problem(mutate(video, 4, 3)), .badVersion(3))
        XCTAssertEqual(problem(mutate(video, 5, 9)), .unknownType(9))
        XCTAssertEqual(problem(mutate(video, 28, 7)), .badFormat(7))
        XCTAssertEqual(problem(mutate(video, 29, 0)), .badOrientation(0))
        XCTAssertEqual(problem(mutate(video, 29, 9)), .badOrientation(9))
        if case .badSize = problem(mutate(video, 20, 63)) {} else { XCTFail("odd NV12 width accepted") }
        if case .badSize = problem(mutate(video, 17, 0)) {} else { XCTFail("wrong payload size accepted") }
        if case .badSize = problem(mutate(video, 23, 0xFF)) {} else { XCTFail("absurd width accepted") }
        if case .badSize = problem(mutate(audio, 24, 0)) {} else { XCTFail("zero channels accepted") }
        if case .badSize = problem(mutate(audio, 16, 3)) {} else { XCTFail("partial sample frame accepted") }
        if case .badSize = problem(mutate(audio, 19, 0x7F)) {} else { XCTFail("2 GB audio payload accepted") }
        if case .badSize = problem(mutate(audio, 21, 0)) {} else { XCTFail("sample rate 0..255 accepted") }
        if case .badSize = problem(Array(video[0..<20])) {} else { XCTFail("short header accepted") }
    }

    /// Random and mutated headers: never a crash, and whatever is accepted is a sane message.
    func testFuzzedHeadersNeverCrashAndAcceptedOnesAreSane() {
        var rng = SystemRandomNumberGenerator()
        let seeds = [
            IngestFraming.encode(.video(.nv12, width: 1170, height: 2532, timestamp: 0, orientation: .left)),
            IngestFraming.encode(.video(.bgra, width: 33, height: 17, timestamp: 5, orientation: .up)),
            IngestFraming.encode(.audio(.mic, format: .f32, rate: 48000, channels: 1, bigEndian: true, timestamp: 9, payloadSize: 4096)),
            IngestFraming.encode(IngestFraming.Header(type: .end)),
        ]
        var accepted = 0
        for i in 0..<200_000 {
            var b: [UInt8]
            if i % 4 == 0 {
                b = (0..<IngestFraming.headerSize).map { _ in UInt8.random(in: 0...255, using: &rng) }
                if i % 8 == 0 { b[0..<4] = IngestFraming.magic[0..<4]; b[4] = 1 }
            } else {
                b = seeds[i % seeds.count]
                for _ in 0..<Int.random(in: 1...3, using: &rng) { b[Int.random(in: 0..<b.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng) }
            }
            guard let h = try? parse(b) else { continue }
            accepted += 1
            switch h.type {
            case .video:
                XCTAssertLessThanOrEqual(h.payloadSize, IngestFraming.maxVideoPayload)
                XCTAssertTrue((2...IngestFraming.maxDimension).contains(h.a) && (2...IngestFraming.maxDimension).contains(h.b))
            case .app, .mic:
                XCTAssertLessThanOrEqual(h.payloadSize, IngestFraming.maxAudioPayload)
                XCTAssertTrue((1...8).contains(h.b))
            case .end:
                XCTAssertEqual(h.payloadSize, 0)
            case .privacy:
                XCTAssertLessThanOrEqual(h.payloadSize, IngestFraming.maxCardName)
                XCTAssertTrue((0...1).contains(h.a))
            }
        }
        XCTAssertGreaterThan(accepted, 1000, "mutations of valid headers are sometimes still valid")
    }

    /// A live `socket` source fed garbage, truncated and mutated messages over many connections
    /// keeps running and records the good producer that comes last.
    func testSocketSourceSurvivesMutatedStreams() throws {
        let dir = TestSupport.scratch()
        let socket = "/tmp/avg-fuzz-\(UUID().uuidString.prefix(8)).sock"
        let checked = TestSupport.check("""
        duration: 60s
        nodes:
          phone: {type: socket, path: \(socket), size: 64x32, buffer: 16}
          out:   {type: null, in: [phone.video, phone.app, phone.mic]}
        """, in: dir)
        XCTAssertTrue(checked.isValid, checked.diagnostics.map(\.description).joined())
        let log = EventLog(output: .none)
        let lines = Lines()
        log.addListener { lines.append($0) }
        let run = try PipelineRun(checked, events: log)
        let done = DispatchSemaphore(value: 0)
        let runner = Thread { try? run.run(); done.signal() }
        runner.start()

        let picture = [UInt8](repeating: 100, count: 64 * 32 * 3 / 2)
        let good = IngestFraming.encode(.video(.nv12, width: 64, height: 32, timestamp: 0, orientation: .up)) + picture
        let audio = IngestFraming.encode(.audio(.app, format: .s16, rate: 48000, channels: 2, bigEndian: false, timestamp: 0, payloadSize: 4096))
            + [UInt8](repeating: 0, count: 4096)
        for round in 0..<40 {
            guard let fd = try? UnixSocket.connect(path: socket) else { usleep(50_000); continue }
            var stream = good + audio + good
            switch round % 4 {
            case 0: stream = (0..<5000).map { _ in UInt8.random(in: 0...255) }
            case 1: stream = Array(stream.prefix(Int.random(in: 1..<stream.count)))
            default:
                for _ in 0..<4 { stream[Int.random(in: 0..<64)] = UInt8.random(in: 0...255) }
            }
            try? stream.withUnsafeBytes { try UnixSocket.writeAll(fd, $0) }
            close(fd)
        }
        // What the bad rounds queued drains first; the count is read once it has stopped moving.
        var emittedBefore = -1
        for _ in 0..<50 {
            usleep(200_000)
            let now = Self.emittedPictures(run)
            if now == emittedBefore { break }
            emittedBefore = now
        }
        XCTAssertFalse(run.isStopping, "the pipeline stopped")
        let fd = try UnixSocket.connect(path: socket)
        // Paced like a real producer, into a queue that holds all ten: this test is about surviving
        // bad input, and a loaded machine that stalls the source thread must not turn it into a drop test.
        for k in 0..<10 {
            let message = IngestFraming.encode(.video(.nv12, width: 64, height: 32, timestamp: Int64(k) * 33_333, orientation: .up)) + picture
            try message.withUnsafeBytes { try UnixSocket.writeAll(fd, $0) }
            usleep(20_000)
        }
        try IngestFraming.encode(IngestFraming.Header(type: .end)).withUnsafeBytes { try UnixSocket.writeAll(fd, $0) }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success, "the end message did not end the run")
        close(fd)
        let events = lines.all
        XCTAssertTrue(events.contains { $0.contains("malformed") }, "no warning for a malformed message")
        XCTAssertTrue(events.contains { $0.contains("\"ended\"") })
        XCTAssertEqual(Self.emittedPictures(run) - emittedBefore, 10, "the last producer's pictures went through")
    }

    private static func emittedPictures(_ run: PipelineRun) -> Int {
        run.stats().nodes.first { $0.node == "phone" }?.emitted?.first ?? 0
    }

    final class Lines: @unchecked Sendable {
        private let lock = NSLock()
        private var lines: [String] = []
        func append(_ s: String) { lock.lock(); lines.append(s); lock.unlock() }
        var all: [String] { lock.lock(); defer { lock.unlock() }; return lines }
    }
}
