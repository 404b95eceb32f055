import AVGraph
import Foundation
import XCTest

extension IONodeTests {
    /// Each of the eight tags written as an MP4 display matrix (an `h264 passthrough: auto`
    /// stream declares its first picture's tag) reads back as the same tag (the file source's
    /// reading of a display matrix): what the recording says is what `orient` would have done.
    func testEveryOrientationSurvivesTheDisplayMatrixOfAnMP4() throws {
        for tag in Orientation.allCases {
            let dir = TestSupport.scratch()
            _ = try run("""
                nodes:
                  src: {type: testsrc, size: 64x48, rate: 30, duration: 0.2s, orientation: \(tag.rawValue)}
                  v:   {type: h264, in: src.video, passthrough: auto, preset: ultrafast}
                  out: {type: file, in: [v], path: tagged.mp4}
                """, in: dir)
            let streams = try TestSupport.shell(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_streams", dir + "/tagged.mp4"])
            XCTAssertEqual(streams.contains("Display Matrix"), tag != .up, "\(tag): a display matrix in the MP4 unless upright")
            let before = OrientationRecorder.seen.all.count
            _ = try run("""
                nodes:
                  src: {type: file, path: tagged.mp4}
                  rec: {type: test-orientations, in: src.video}
                """, in: dir)
            let seen = Set(OrientationRecorder.seen.all.dropFirst(before))
            XCTAssertEqual(seen, [tag.rawValue], "\(tag) written and read back")
        }
    }
}
