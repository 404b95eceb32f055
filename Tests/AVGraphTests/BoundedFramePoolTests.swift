import AVGraph
import CFFmpeg
import Foundation
import XCTest

/// The ingest picture pool: bounded, never allocating on the taking thread once it has a buffer,
/// and holding only the memory a backlog really needed.
final class BoundedFramePoolTests: XCTestCase {
    /// Takes a picture, waiting (off the pool) for a buffer being made ready; nil after `timeout`.
    func take(_ pool: BoundedFramePool, timeout: Double = 5) -> Frame? {
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            if let f = pool.frame(timeBase: Rational(1, 30)) { return f }
            usleep(2000)
        }
        return nil
    }

    func testGrowsOffTheTakingThreadUpToItsBound() throws {
        let pool = try BoundedFramePool(width: 1170, height: 2532, pixelFormat: AV_PIX_FMT_NV12, limit: 3, prewarm: 1)
        var held: [Frame] = []
        held.append(try XCTUnwrap(pool.frame(timeBase: Rational(1, 30)), "the prewarmed buffer"))
        // No free buffer: this taking returns nil at once and a buffer is made ready elsewhere.
        XCTAssertNil(pool.frame(timeBase: Rational(1, 30)), "a backlog's first taking drops instead of allocating")
        held.append(try XCTUnwrap(take(pool), "the buffer made ready off the taking thread"))
        held.append(try XCTUnwrap(take(pool), "the third, up to the bound"))
        XCTAssertNil(take(pool, timeout: 0.3), "never more than `limit` buffers")
        XCTAssertEqual(pool.allocatedBuffers, 3)
        // A buffer that comes back is reused, untouched by the bound.
        held.removeFirst()
        XCTAssertNotNil(pool.frame(timeBase: Rational(1, 30)))
        // The pictures are whole and writable.
        for f in held { XCTAssertEqual(f.width, 1170); XCTAssertEqual(f.height, 2532); XCTAssertNotNil(f.plane(1)) }
    }

    func testHoldsOnlyThePrewarmedPicturesUntilABacklog() throws {
        let pool = try BoundedFramePool(width: 1170, height: 2532, pixelFormat: AV_PIX_FMT_NV12, limit: 7, prewarm: 2)
        // Two pictures allocated and touched (8.9 MB), not the seven the bound allows (31 MB).
        XCTAssertEqual(pool.allocatedBuffers, 2)
        // Taking and giving back in turn (a pipeline that keeps up) never adds a buffer.
        for _ in 0..<20 {
            let a = try XCTUnwrap(pool.frame(timeBase: Rational(1, 30)))
            let b = try XCTUnwrap(pool.frame(timeBase: Rational(1, 30)))
            XCTAssertFalse(a.plane(0) == b.plane(0))
        }
        XCTAssertEqual(pool.allocatedBuffers, 2)
    }

    /// After a backlog, the extra buffers go back to the system once a window or two of lighter
    /// use has passed; the prewarmed ones stay.
    func testGivesABacklogsBuffersBackAfterIt() throws {
        let pool = try BoundedFramePool(width: 1170, height: 2532, pixelFormat: AV_PIX_FMT_NV12, limit: 5, prewarm: 1, window: 0.05)
        var held: [Frame] = []
        for _ in 0..<4 { held.append(try XCTUnwrap(take(pool))) }
        XCTAssertEqual(pool.allocatedBuffers, 4, "the backlog's buffers")
        held.removeAll()
        usleep(150_000)
        for _ in 0..<6 { _ = try XCTUnwrap(pool.frame(timeBase: Rational(1, 30))) }
        XCTAssertEqual(pool.allocatedBuffers, 1, "back to the prewarmed picture")
        // A new backlog grows it again.
        for _ in 0..<3 { held.append(try XCTUnwrap(take(pool))) }
        XCTAssertEqual(pool.allocatedBuffers, 3)
    }

    /// The pools behind scaling and turning give a stalled encoder's backlog back the same way.
    func testVideoFramePoolGivesABacklogBack() throws {
        let pool = try VideoFramePool(width: 1280, height: 720, pixelFormat: AV_PIX_FMT_NV12)
        var held = try (0..<6).map { _ in try pool.frame(timeBase: Rational(1, 30)) }
        XCTAssertEqual(pool.allocatedBuffers, 6)
        held.removeAll()
        usleep(2_100_000)       // the default window is 1 s
        for _ in 0..<6 { _ = try pool.frame(timeBase: Rational(1, 30)) }
        XCTAssertEqual(pool.allocatedBuffers, 1, "one picture in use at a time needs one buffer")
    }
}
