import AVGraph
import CFFmpeg
import Foundation
import XCTest

/// The one-pass scale and quarter turn (`TurnScaler`) against swscale's bicubic scale followed by
/// the turn, which `resize` did before, on a picture with what a phone screen has: flat areas,
/// hard edges of text and buttons, gradients.
final class TurnScalerTests: XCTestCase {
    /// A stored picture of `width` x `height` 4:2:0 with content that shows a wrong turn, flip,
    /// shift or scale: bars of "text" at irregular places, a gradient, a ring, coloured blocks.
    func screen(_ width: Int, _ height: Int, _ format: AVPixelFormat) throws -> Frame {
        let f = try VideoFramePool(width: width, height: height, pixelFormat: format).frame(timeBase: Rational(1, 30))
        let y0 = f.plane(0)!, ls = f.lineSize(0)
        for y in 0..<height {
            for x in 0..<width {
                var v = 40 + 150 * x / width + 40 * y / height
                if (y / 23) % 3 == 0 && (x * 7 + y / 23 * 13) % 97 < 60 && x > width / 10 { v = 230 }
                let dx = x - width / 3, dy = y - height / 4, r = dx * dx + dy * dy, ring = width / 5
                if r > ring * ring && r < (ring + 9) * (ring + 9) { v = 12 }
                y0[y * ls + x] = UInt8(v)
            }
        }
        let cw = width / 2, ch = height / 2
        for y in 0..<ch {
            for x in 0..<cw {
                let u = UInt8(90 + 80 * x / cw), v = UInt8(200 - 100 * y / ch)
                let block = x < cw / 4 && y < ch / 5
                if format == AV_PIX_FMT_NV12 {
                    f.plane(1)![y * f.lineSize(1) + 2 * x] = block ? 60 : u
                    f.plane(1)![y * f.lineSize(1) + 2 * x + 1] = block ? 220 : v
                } else {
                    f.plane(1)![y * f.lineSize(1) + x] = block ? 60 : u
                    f.plane(2)![y * f.lineSize(2) + x] = block ? 220 : v
                }
            }
        }
        return f
    }

    /// The three planes of `rect` of a yuv420p frame, row by row.
    func planes(_ f: Frame, _ rect: PixelRect) -> [[UInt8]] {
        (0..<3).map { p in
            let s = p == 0 ? 0 : 1
            var out: [UInt8] = []
            for y in (rect.y >> s)..<((rect.y + rect.height) >> s) {
                out += UnsafeBufferPointer(start: f.plane(p)! + y * f.lineSize(p) + (rect.x >> s), count: rect.width >> s)
            }
            return out
        }
    }

    func psnr(_ a: [UInt8], _ b: [UInt8]) -> Double {
        var e = 0.0
        for (x, y) in zip(a, b) { let d = Double(x) - Double(y); e += d * d }
        let mse = e / Double(a.count)
        return mse == 0 ? 99 : 10 * log10(255 * 255 / mse)
    }

    func canvas(_ w: Int, _ h: Int) throws -> Frame {
        let f = try VideoFramePool(width: w, height: h, pixelFormat: AV_PIX_FMT_YUV420P).frame(timeBase: Rational(1, 30))
        for p in 0..<3 { memset(f.plane(p)!, 7, f.lineSize(p) * (p == 0 ? h : h / 2)) }
        return f
    }

    /// What swscale and the turn make of the same conversion.
    func reference(_ source: Frame, _ tag: Orientation, _ target: PixelRect, canvasWidth: Int, canvasHeight: Int, fullRange: Bool) throws -> Frame {
        let layout = PixelLayout(AV_PIX_FMT_YUV420P)!
        let scaler = try Scaler(from: source.width, source.height, source.pixelFormat, to: target.height, target.width, AV_PIX_FMT_YUV420P,
                                sourceFullRange: fullRange, threads: 1)
        let scaled = try VideoFramePool(width: target.height, height: target.width, pixelFormat: AV_PIX_FMT_YUV420P).frame(timeBase: Rational(1, 30))
        try scaler.scale(source, PixelRect(x: 0, y: 0, width: source.width, height: source.height), into: scaled,
                         PixelRect(x: 0, y: 0, width: scaled.width, height: scaled.height))
        let out = try canvas(canvasWidth, canvasHeight)
        PictureTurn.upright(scaled, into: out.region(target, layout: layout), map: tag.storage, layout: layout, bands: 1)
        return out
    }

    func testScaleAndTurnMatchesSwscaleThenTurnForEveryQuarterTag() throws {
        // The phone screen fitted into 720p (a downscale by 2), and a small picture fitted up.
        let cases: [(sw: Int, sh: Int, target: PixelRect, canvas: (Int, Int))] = [
            (1170, 2532, PixelRect(x: 0, y: 64, width: 1280, height: 590), (1280, 720)),
            (180, 320, PixelRect(x: 16, y: 0, width: 1248, height: 702), (1280, 720)),
        ]
        for c in cases {
            for format in [AV_PIX_FMT_NV12, AV_PIX_FMT_YUV420P] {
                let source = try screen(c.sw, c.sh, format)
                for tag in Orientation.allCases where tag.storage.swapsAxes {
                    for fullRange in [false, true] {
                        let name = "\(c.sw)x\(c.sh) \(format == AV_PIX_FMT_NV12 ? "nv12" : "yuv420p") \(tag) full range \(fullRange)"
                        let want = try reference(source, tag, c.target, canvasWidth: c.canvas.0, canvasHeight: c.canvas.1, fullRange: fullRange)
                        guard let scaler = TurnScaler(from: c.sw, c.sh, format, to: c.target.width, c.target.height, AV_PIX_FMT_YUV420P,
                                                      map: tag.storage, quality: .bicubic, sourceFullRange: fullRange,
                                                      sourceMatrix: SWS_CS_ITU709, chromaLocation: AVCHROMA_LOC_LEFT, parts: 1) else {
                            return XCTFail("\(name): no one-pass scaler")
                        }
                        let got = try canvas(c.canvas.0, c.canvas.1)
                        scaler.scale(source, PixelRect(x: 0, y: 0, width: c.sw, height: c.sh), into: got, c.target)
                        let a = planes(want, c.target), b = planes(got, c.target)
                        let q = (0..<3).map { psnr(a[$0], b[$0]) }
                        // Both are bicubic (B 0, C 0.6); they differ in rounding and in where chroma
                        // samples sit after the turn (swscale scales before turning, so its
                        // horizontal siting ends up vertical). Measured: luma 56-60 dB, chroma
                        // 50-60 dB; a wrong flip gives 9-30 dB.
                        XCTAssertGreaterThan(q[0], 50, "\(name): luma PSNR")
                        XCTAssertGreaterThan(q[1], 45, "\(name): U PSNR")
                        XCTAssertGreaterThan(q[2], 45, "\(name): V PSNR")
                        // Nothing written outside the target rectangle.
                        let canvasBytes = planes(got, PixelRect(x: 0, y: 0, width: c.canvas.0, height: c.canvas.1))[0]
                        XCTAssertEqual(canvasBytes[0], 7, name)
                        XCTAssertEqual(canvasBytes[(c.target.y + c.target.height) * c.canvas.0 + c.canvas.0 - 1], 7, name)
                    }
                }
            }
        }
    }

    func testEveryVectorPathAndPartCountGivesTheSameBytes() throws {
        let source = try screen(1170, 2532, AV_PIX_FMT_NV12)
        let target = PixelRect(x: 0, y: 64, width: 1280, height: 590)
        var outputs: [[[UInt8]]] = []
        let units: [TurnScaler.VectorUnits] = [.avx512, .avx2, .none]
        for (vector, parts) in [(units[0], 1), (units[1], 1), (units[2], 1), (units[0], 2), (units[0], 3), (units[2], 3)] {
            let scaler = try XCTUnwrap(TurnScaler(from: 1170, 2532, AV_PIX_FMT_NV12, to: 1280, 590, AV_PIX_FMT_YUV420P, map: Orientation.right.storage,
                                                  quality: .bicubic, sourceFullRange: true, sourceMatrix: SWS_CS_ITU709,
                                                  chromaLocation: AVCHROMA_LOC_LEFT, parts: parts, vectorUnits: vector))
            XCTAssertEqual(scaler.parts, parts)
            XCTAssertEqual(scaler.vectorUnits, min(vector, TurnScaler.VectorUnits.available))
            let out = try canvas(1280, 720)
            scaler.scale(source, PixelRect(x: 0, y: 0, width: 1170, height: 2532), into: out, target)
            outputs.append(planes(out, PixelRect(x: 0, y: 0, width: 1280, height: 720)))
        }
        for (i, o) in outputs.enumerated().dropFirst() { XCTAssertTrue(o == outputs[0], "run \(i) differs from the first") }
    }

    func testFlatFullRangeColorsBecomeTheirLimitedRangeLevels() throws {
        for (y, u, v, want) in [(UInt8(0), UInt8(128), UInt8(128), [16, 128, 128]), (255, 0, 255, [235, 16, 240]), (128, 64, 192, [126, 72, 184])] {
            let source = try VideoFramePool(width: 200, height: 400, pixelFormat: AV_PIX_FMT_NV12).frame(timeBase: Rational(1, 30))
            memset(source.plane(0)!, Int32(y), source.lineSize(0) * 400)
            for i in 0..<(source.lineSize(1) * 200 / 2) { source.plane(1)![2 * i] = u; source.plane(1)![2 * i + 1] = v }
            let scaler = try XCTUnwrap(TurnScaler(from: 200, 400, AV_PIX_FMT_NV12, to: 640, 320, AV_PIX_FMT_YUV420P, map: Orientation.left.storage,
                                                  quality: .bicubic, sourceFullRange: true, sourceMatrix: SWS_CS_ITU709,
                                                  chromaLocation: AVCHROMA_LOC_LEFT, parts: 1))
            let out = try canvas(640, 320)
            scaler.scale(source, PixelRect(x: 0, y: 0, width: 200, height: 400), into: out, PixelRect(x: 0, y: 0, width: 640, height: 320))
            let p = planes(out, PixelRect(x: 0, y: 0, width: 640, height: 320))
            for k in 0..<3 { XCTAssertEqual(Set(p[k]), [UInt8(want[k])], "full range \(y),\(u),\(v): plane \(k)") }
        }
    }

    /// Chroma lands where its tag says it is, upright: ramps in the stored picture's chroma (U
    /// along stored x, V along stored y), scaled up with the bilinear kernel (which keeps a ramp a
    /// ramp), must read, at each output chroma sample's place mapped back through the turn, the
    /// ramp's value there, to within rounding. A place off by a quarter chroma sample is off by 1.5
    /// levels here.
    func testChromaLandsWhereItsLocationTagSaysForEveryQuarterTag() throws {
        let (sw, sh, tw, th) = (64, 96, 192, 128)
        let locations: [(AVChromaLocation, x: Double, y: Double)] = [
            (AVCHROMA_LOC_LEFT, 0.5, 1), (AVCHROMA_LOC_CENTER, 1, 1), (AVCHROMA_LOC_TOPLEFT, 0.5, 0.5), (AVCHROMA_LOC_TOP, 1, 0.5),
        ]
        let source = try VideoFramePool(width: sw, height: sh, pixelFormat: AV_PIX_FMT_NV12).frame(timeBase: Rational(1, 30))
        memset(source.plane(0)!, 128, source.lineSize(0) * sh)
        for j in 0..<(sh / 2) {
            for i in 0..<(sw / 2) {
                source.plane(1)![j * source.lineSize(1) + 2 * i] = UInt8(30 + 6 * i)
                source.plane(1)![j * source.lineSize(1) + 2 * i + 1] = UInt8(20 + 4 * j)
            }
        }
        for tag in Orientation.allCases where tag.storage.swapsAxes {
            for (location, sx, sy) in locations {
                let map = tag.storage
                let scaler = try XCTUnwrap(TurnScaler(from: sw, sh, AV_PIX_FMT_NV12, to: tw, th, AV_PIX_FMT_YUV420P, map: map,
                                                      quality: .bilinear, sourceFullRange: false, sourceMatrix: SWS_CS_ITU709,
                                                      chromaLocation: location, parts: 1))
                let out = try canvas(tw, th)
                scaler.scale(source, PixelRect(x: 0, y: 0, width: sw, height: sh), into: out, PixelRect(x: 0, y: 0, width: tw, height: th))
                var worst = 0.0, total = 0.0, count = 0
                for m in 0..<(th / 2) {
                    for k in 0..<(tw / 2) {
                        // The output sample's place upright, then in the stored picture (luma units).
                        let x = 2 * Double(k) + sx, y = 2 * Double(m) + sy
                        let storedY = map.flipY ? Double(sh) - x * Double(sh) / Double(tw) : x * Double(sh) / Double(tw)
                        let storedX = map.flipX ? Double(sw) - y * Double(sw) / Double(th) : y * Double(sw) / Double(th)
                        // Away from the edges, where the ramp is continued by repeating the edge.
                        guard storedX > 4, storedX < Double(sw) - 4, storedY > 4, storedY < Double(sh) - 4 else { continue }
                        let u = 30 + 3 * (storedX - sx), v = 20 + 2 * (storedY - sy)
                        let gotU = Double(out.plane(1)![m * out.lineSize(1) + k]), gotV = Double(out.plane(2)![m * out.lineSize(2) + k])
                        worst = max(worst, abs(gotU - u), abs(gotV - v))
                        // Beyond what rounding to whole levels must cost.
                        total += abs(gotU - u) - abs(u.rounded() - u) + abs(gotV - v) - abs(v.rounded() - v)
                        count += 2
                    }
                }
                XCTAssertGreaterThan(count, 1000)
                XCTAssertLessThan(total / Double(count), 0.1, "\(tag) chroma location \(location.rawValue): mean error beyond rounding")
                XCTAssertLessThan(worst, 1.01, "\(tag) chroma location \(location.rawValue): worst error")
            }
        }
    }

    func testConversionsItCannotDoExactlyAreLeftToSwscale() {
        func make(_ format: AVPixelFormat, _ tag: Orientation, matrix: Int32 = SWS_CS_ITU709, size: (Int, Int) = (1280, 590)) -> TurnScaler? {
            TurnScaler(from: 1170, 2532, format, to: size.0, size.1, AV_PIX_FMT_YUV420P, map: tag.storage, quality: .bicubic,
                       sourceFullRange: false, sourceMatrix: matrix, chromaLocation: AVCHROMA_LOC_LEFT)
        }
        XCTAssertNotNil(make(AV_PIX_FMT_NV12, .right))
        XCTAssertNil(make(AV_PIX_FMT_NV12, .up), "an upright picture: swscale alone")
        XCTAssertNil(make(AV_PIX_FMT_NV12, .right, matrix: SWS_CS_ITU601), "a matrix change mixes planes")
        XCTAssertNil(make(AV_PIX_FMT_RGBA, .right))
        XCTAssertNil(make(AV_PIX_FMT_NV12, .right, size: (40, 18)), "a downscale by over 30 needs over 128 taps")
    }
}
