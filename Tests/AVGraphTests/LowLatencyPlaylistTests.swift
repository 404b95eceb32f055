import AVGraph
import Foundation
import XCTest

/// The low-latency media playlist's rules (RFC 8216bis) on a playlist built by hand: which parts
/// are listed, the preload hint, delta updates, what a blocking reload waits for, and the names
/// of parts and segments a request may ask for.
final class LowLatencyPlaylistTests: XCTestCase {
    /// Segments of 1 s in parts of 0.2 s: `complete` whole segments, then `parts` parts of the next.
    static func playlist(complete: Int, parts: Int, first: Int = 0, window: Int? = 20) -> LowLatencyPlaylist {
        var p = LowLatencyPlaylist(name: "360p", targetDuration: 1, partTarget: 0.2, window: window)
        p.others = ["180p"]
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        for msn in first..<(first + complete + (parts > 0 ? 1 : 0)) {
            var s = LowLatencyPlaylist.Segment(msn: msn, date: start.addingTimeInterval(Double(msn)))
            let count = msn < first + complete ? 5 : parts
            s.parts = (0..<count).map { .init(duration: 0.2, independent: $0 == 0) }
            if msn < first + complete { s.duration = 1 }
            p.segments.append(s)
        }
        return p
    }

    func testPartsAreListedForTheLastThreeTargetDurationsAndTheHintNamesTheNextPart() {
        let p = Self.playlist(complete: 8, parts: 2)
        let text = p.render(skip: false, reports: ["180p": (8, 1)])
        let lines = text.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "#EXTM3U")
        XCTAssertTrue(lines.contains("#EXT-X-PART-INF:PART-TARGET=0.20000"))
        XCTAssertTrue(lines.contains("#EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL=6.00000,PART-HOLD-BACK=0.60000"))
        // 8.4 s listed: the segments that end less than 3 s before the end (5, 6, 7) list their parts, and 8 being written.
        let listed = Set(lines.filter { $0.hasPrefix("#EXT-X-PART:") }.compactMap { $0.split(separator: "\"").dropFirst().first.map { String($0.prefix(9)) } })
        XCTAssertEqual(listed, ["seg_00005", "seg_00006", "seg_00007", "seg_00008"])
        XCTAssertEqual(lines.filter { $0.hasPrefix("#EXTINF:") }.count, 8)
        XCTAssertTrue(lines.contains("#EXT-X-PART:DURATION=0.20000,URI=\"seg_00008.p0.m4s\",INDEPENDENT=YES"))
        XCTAssertTrue(lines.contains("#EXT-X-PART:DURATION=0.20000,URI=\"seg_00008.p1.m4s\""))
        XCTAssertTrue(lines.contains("#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg_00008.p2.m4s\""))
        XCTAssertTrue(lines.contains("#EXT-X-RENDITION-REPORT:URI=\"../180p/index.m3u8\",LAST-MSN=8,LAST-PART=1"))
        XCTAssertFalse(text.contains("#EXT-X-ENDLIST"))
    }

    func testAFinishedSegmentHintsTheFirstPartOfTheNext() {
        let p = Self.playlist(complete: 3, parts: 0)
        XCTAssertTrue(p.render(skip: false, reports: [:]).contains("#EXT-X-PRELOAD-HINT:TYPE=PART,URI=\"seg_00003.p0.m4s\""))
    }

    func testADeltaUpdateSkipsWhatIsOlderThanSixTargetDurationsAndKeepsTheRest() {
        let p = Self.playlist(complete: 12, parts: 1, first: 3)
        let full = p.render(skip: false, reports: [:]), delta = p.render(skip: true, reports: [:])
        // 12.2 s listed: segments wholly more than 6 s behind the end are skipped (the first 6).
        XCTAssertTrue(delta.contains("#EXT-X-SKIP:SKIPPED-SEGMENTS=6\n"), delta)
        XCTAssertFalse(delta.contains("seg_00008.m4s"))
        XCTAssertTrue(delta.contains("seg_00009.m4s"))
        // What follows the skip is the full playlist's tail, line for line.
        let tail = delta.components(separatedBy: "#EXT-X-SKIP:SKIPPED-SEGMENTS=6\n")[1]
        XCTAssertTrue(full.hasSuffix(tail))
        XCTAssertTrue(full.contains("#EXT-X-MEDIA-SEQUENCE:3\n") && delta.contains("#EXT-X-MEDIA-SEQUENCE:3\n"))
    }

    func testABlockingReloadWaitsForThePartItNames() {
        let p = Self.playlist(complete: 4, parts: 2)
        XCTAssertTrue(p.contains(msn: 4, part: 1))
        XCTAssertFalse(p.contains(msn: 4, part: 2))
        XCTAssertTrue(p.contains(msn: 3, part: 9), "a part past a finished segment's last is the next segment's first: there")
        XCTAssertTrue(p.contains(msn: 3, part: nil))
        XCTAssertFalse(p.contains(msn: 4, part: nil), "segment 4 is not complete")
        XCTAssertFalse(p.contains(msn: 5, part: 0))
        var ended = p
        ended.ended = true
        XCTAssertTrue(ended.contains(msn: 5, part: 0), "an ended playlist answers at once")
        XCTAssertTrue(ended.render(skip: false, reports: [:]).hasSuffix("#EXT-X-ENDLIST\n"))
    }

    func testTheClassicPlaylistNamesWholeSegmentsOnly() {
        let text = Self.playlist(complete: 3, parts: 4).renderClassic()
        XCTAssertFalse(text.contains("EXT-X-PART"))
        XCTAssertFalse(text.contains("PRELOAD"))
        XCTAssertEqual(text.components(separatedBy: "#EXTINF:1.00000,").count - 1, 3)
    }

    func testRequestNames() {
        XCTAssertTrue(LowLatencyPresentation.mediaName("seg_00012.m4s")! == (12, nil))
        XCTAssertTrue(LowLatencyPresentation.mediaName("seg_00012.p3.m4s")! == (12, 3))
        for bad in ["seg_.m4s", "seg_-1.m4s", "seg_1.p.m4s", "seg_1.q3.m4s", "seg_1.p3.x.m4s", "seg_1.p-2.m4s", "../seg_1.m4s", "seg_1.mp4", "seg_１.m4s"] {
            XCTAssertNil(LowLatencyPresentation.mediaName(bad), bad)
        }
    }
}
