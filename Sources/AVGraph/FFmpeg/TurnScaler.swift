import CFFmpeg
internal import CKernels
import Foundation

/// Scales a quarter-turned 8-bit 4:2:0 picture and stands it upright in one pass over its
/// samples (CKernels' avg_scale_turn), where swscale would scale it in its stored orientation
/// and a second pass turn the result. Every filter runs down buffer columns, whole rows of
/// samples per coefficient (AVX-512 or AVX2 where the CPU has it, the same bytes without), so the stored
/// picture is read once and the turn happens on a strip that stays in cache. Range conversion
/// to limited is folded into the filters; a matrix conversion is not (`init` returns nil and
/// `resize` keeps swscale for it, as for every other format or an upright picture).
// @unchecked: `scale` runs its column parts on several threads at once, each writing only its own scratch
// block (raw pointers); the filters are read-only after init.
public final class TurnScaler: @unchecked Sendable {
    /// One plane of the output: which stored plane feeds it, and its two filters.
    struct PlanePass {
        let sourcePlane: Int
        /// Interleaved pairs (NV12 chroma) split to two target planes.
        let pairs: Bool
        let targetPlanes: [Int]
        /// Upright width and height of the plane's part of the target.
        let width: Int, height: Int
        let across: ResamplingFilter
        let down: ResamplingFilter
        /// 1/32 levels added after filtering (limited range's floor, or chroma's centre).
        let offset: Int32
        /// Stored rows one strip's filter across reaches (avg_scale_turn_rows).
        let rows: Int32
    }

    public let sourceWidth: Int, sourceHeight: Int
    public let targetWidth: Int, targetHeight: Int
    /// Parts each picture is split into, one thread each (1: the calling thread only).
    public let parts: Int
    public let vectorUnits: VectorUnits
    let passes: [PlanePass]
    let sourceLayout: PixelLayout, targetLayout: PixelLayout
    /// Where each part's upright columns start (and the last ends): 64-sample steps, whole cache
    /// lines of every plane's rows.
    let columnEdges: [Int]
    /// One scratch area per part: the strip across and its turned copy.
    let scratch: [UnsafeMutableRawPointer]

    /// The kernel's paths, which give the same bytes: plain C, AVX2, AVX-512 (BW).
    public enum VectorUnits: Int32, Comparable, Sendable {
        case none = 0, avx2 = 1, avx512 = 2
        public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
        /// The widest this CPU runs, or narrower if AVGRAPH_VECTOR_UNITS (none, avx2, avx512) says so.
        public static let available: VectorUnits = {
            let cpu = VectorUnits(rawValue: avg_scale_turn_simd()) ?? .none
            switch ProcessInfo.processInfo.environment["AVGRAPH_VECTOR_UNITS"] {
            case "none": return .none
            case "avx2": return min(cpu, .avx2)
            default: return cpu
            }
        }()
    }

    /// False when AVGRAPH_ONE_PASS_SCALER=0: every picture goes through swscale (and the turn after
    /// it), as before this pass existed; for comparing the two on one machine.
    public static let enabled = ProcessInfo.processInfo.environment["AVGRAPH_ONE_PASS_SCALER"] != "0"

    /// nil where this pass cannot do the conversion exactly as asked (then swscale does it).
    /// `sourceWidth` x `sourceHeight` is the stored region; `targetWidth` x `targetHeight` the
    /// upright one. `chromaLocation` is the source's (the target keeps it).
    public init?(from sw: Int, _ sh: Int, _ sourceFormat: AVPixelFormat, to tw: Int, _ th: Int, _ targetFormat: AVPixelFormat,
                 map: StorageMap, quality: Scaler.Quality, sourceFullRange: Bool, sourceMatrix: Int32,
                 chromaLocation: AVChromaLocation, parts: Int? = nil, vectorUnits: VectorUnits = .available) {
        guard Self.enabled, map.swapsAxes, sourceMatrix == SWS_CS_ITU709,
              sourceFormat == AV_PIX_FMT_NV12 || sourceFormat == AV_PIX_FMT_YUV420P,
              targetFormat == AV_PIX_FMT_YUV420P,
              sw >= 8, sh >= 8, tw >= 2, th >= 2, sw % 2 == 0, sh % 2 == 0, tw % 2 == 0, th % 2 == 0,
              let sl = PixelLayout(sourceFormat), let tl = PixelLayout(targetFormat) else { return nil }
        let kernel: ResamplingFilter.Kernel
        switch quality {
        case .fast, .bilinear: kernel = .bilinear
        case .bicubic: kernel = .bicubic
        case .lanczos: kernel = .lanczos
        }
        // Where chroma sits in its pair of luma samples across and down (ResamplingFilter.axis);
        // the target keeps the source's tag, so the same places hold upright.
        let siting: (across: Double, down: Double)
        switch chromaLocation {
        case AVCHROMA_LOC_CENTER: siting = (1, 1)
        case AVCHROMA_LOC_TOPLEFT: siting = (0.5, 0.5)
        case AVCHROMA_LOC_TOP: siting = (1, 0.5)
        case AVCHROMA_LOC_BOTTOMLEFT: siting = (0.5, 1.5)
        case AVCHROMA_LOC_BOTTOM: siting = (1, 1.5)
        default: siting = (0.5, 1)  // "left", H.264's and a phone's, and what unspecified means
        }
        func pass(source: Int, pairs: Bool, targets: [Int], shift: Int, gain: Double, offset: Double) -> PlanePass {
            let across = ResamplingFilter.axis(kernel: kernel, inputLength: sh, outputLength: tw, shift: shift,
                                               inputSiting: siting.down, outputSiting: siting.across, mirrored: map.flipY)
            let down = ResamplingFilter.axis(kernel: kernel, inputLength: sw, outputLength: th, shift: shift,
                                             inputSiting: siting.across, outputSiting: siting.down, mirrored: map.flipX, gain: gain)
            let rows = across.positions.withUnsafeBufferPointer { avg_scale_turn_rows($0.baseAddress, Int32($0.count), Int32(across.taps)) }
            return PlanePass(sourcePlane: source, pairs: pairs, targetPlanes: targets, width: tw >> shift, height: th >> shift,
                             across: across, down: down, offset: Int32((offset * 32).rounded()), rows: rows)
        }
        // Full range in: luma 0...255 to 16...235, chroma about 128 to 16...240.
        let lumaGain = sourceFullRange ? 219.0 / 255 : 1, chromaGain = sourceFullRange ? 224.0 / 255 : 1
        var passes = [pass(source: 0, pairs: false, targets: [0], shift: 0, gain: lumaGain, offset: sourceFullRange ? 16 : 0)]
        let chromaOffset = 128 * (1 - chromaGain)
        if sourceFormat == AV_PIX_FMT_NV12 {
            passes.append(pass(source: 1, pairs: true, targets: [1, 2], shift: 1, gain: chromaGain, offset: chromaOffset))
        } else {
            passes.append(pass(source: 1, pairs: false, targets: [1], shift: 1, gain: chromaGain, offset: chromaOffset))
            passes.append(pass(source: 2, pairs: false, targets: [2], shift: 1, gain: chromaGain, offset: chromaOffset))
        }
        // The kernel's limit (a 30x downscale and more): swscale does those.
        guard passes.allSatisfy({ $0.across.taps <= 128 && $0.down.taps <= 128 }) else { return nil }
        sourceWidth = sw; sourceHeight = sh; targetWidth = tw; targetHeight = th
        self.passes = passes
        sourceLayout = sl
        targetLayout = tl
        self.vectorUnits = min(vectorUnits, .available)
        let n = max(1, min(parts ?? Scaler.threads(forSourcePixels: sw * sh), tw / 64))
        self.parts = n
        columnEdges = (0...n).map { i in i == n ? tw : tw * i / n / 64 * 64 }
        let bytes = passes.map { avg_scale_turn_scratch(Int32(sl.planeWidth($0.sourcePlane, sw)), $0.pairs ? 1 : 0, $0.rows) }.max() ?? 0
        scratch = (0..<n).map { _ in UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64) }
    }

    deinit { for s in scratch { s.deallocate() } }

    /// Scales `sourceRect` of `source` (its stored orientation) upright into `targetRect` of `target`.
    public func scale(_ source: Frame, _ sourceRect: PixelRect, into target: Frame, _ targetRect: PixelRect) {
        if parts == 1 {
            run(part: 0, columns: 0..<targetWidth, source, sourceRect, target, targetRect)
            return
        }
        DispatchQueue.concurrentPerform(iterations: parts) { i in
            run(part: i, columns: columnEdges[i]..<columnEdges[i + 1], source, sourceRect, target, targetRect)
        }
    }

    private func run(part: Int, columns: Range<Int>, _ source: Frame, _ sourceRect: PixelRect, _ target: Frame, _ targetRect: PixelRect) {
        guard !columns.isEmpty else { return }
        let work = scratch[part].assumingMemoryBound(to: UInt8.self)
        for p in passes {
            guard let s0 = source.plane(p.sourcePlane), let d0 = target.plane(p.targetPlanes[0]) else { continue }
            let shift = sourceLayout.planes[p.sourcePlane].shiftX
            let sls = source.lineSize(p.sourcePlane), dls = target.lineSize(p.targetPlanes[0])
            let src = s0 + sourceLayout.offset(plane: p.sourcePlane, x: sourceRect.x, y: sourceRect.y, lineSize: sls)
            let dst0 = d0 + targetLayout.offset(plane: p.targetPlanes[0], x: targetRect.x, y: targetRect.y, lineSize: dls)
            let dst1 = p.targetPlanes.count > 1
                ? target.plane(p.targetPlanes[1]).map { $0 + targetLayout.offset(plane: p.targetPlanes[1], x: targetRect.x, y: targetRect.y, lineSize: dls) }
                : nil
            let x0 = columns.lowerBound >> shift
            let x1 = columns.upperBound == targetWidth ? p.width : columns.upperBound >> shift
            p.across.positions.withUnsafeBufferPointer { ap in
                p.across.coefficients.withUnsafeBufferPointer { ac in
                    p.down.positions.withUnsafeBufferPointer { dp in
                        p.down.coefficients.withUnsafeBufferPointer { dc in
                            _ = avg_scale_turn(src, sls, Int32(sourceLayout.planeWidth(p.sourcePlane, sourceWidth)), p.pairs ? 1 : 0,
                                               ap.baseAddress, ac.baseAddress, Int32(p.across.taps),
                                               dp.baseAddress, dc.baseAddress, Int32(p.down.taps), Int32(p.height), p.offset,
                                               dst0, dst1, dls, Int32(x0), Int32(x1), work, p.rows, vectorUnits.rawValue)
                        }
                    }
                }
            }
        }
    }
}
