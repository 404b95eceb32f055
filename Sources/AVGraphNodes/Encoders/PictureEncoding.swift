import AVGraph
import CFFmpeg

/// What the picture encoders (`h264`, `h265`) share: the input they can take, and the libavcodec
/// context settings that do not depend on the codec.
enum PictureEncoding {
    /// The input picture stream, when an encoder named `name` can take it: pictures of a known,
    /// even size and frame rate; a size that changes only with `passthrough` (which encodes at
    /// the size of the source's pictures, a turned phone's at each of its sizes).
    static func input(_ n: Negotiation, name: String, passthrough: Bool) throws(NegotiationError) -> StreamFormat {
        guard let input = n.format(on: "in") else { throw NegotiationError("needs a video input") }
        guard input.width > 0, input.height > 0 else {
            throw NegotiationError("the input carries no video (a file without a video stream?)", hint: "connect a video source")
        }
        if input.sizeVaries && !passthrough {
            throw NegotiationError("\(name) needs one fixed picture size, but the input's size changes while running",
                                   hint: "put a resize before \(name), e.g. {type: resize, size: \(input.width)x\(input.height)}")
        }
        if input.width % 2 != 0 || input.height % 2 != 0 {
            throw NegotiationError("\(name) needs an even width and height; got \(input.width)x\(input.height)",
                                   hint: "resize to an even size, e.g. {type: resize, size: \(input.width & ~1)x\(input.height & ~1)}")
        }
        guard input.frameRate.num > 0, input.frameRate.den > 0 else {
            throw NegotiationError("the input has no known frame rate", hint: "put an fps node before \(name)")
        }
        return input
    }

    /// What an encoder of `input` with libavcodec's `encoder` puts out: `codec` packets of the
    /// input's size, 4:2:0, one tick of 1/frame rate each. Fails when this FFmpeg lacks the encoder.
    /// With `passthrough`, a size that varies stays varying: the stream takes the size of the
    /// pictures the source sends (`width`/`height` are only what `check` expected).
    static func output(_ input: StreamFormat, codec: String, encoder: String, profile: String, bitRate: Int,
                       passthrough: Bool) throws(NegotiationError) -> StreamFormat {
        guard avcodec_find_encoder_by_name(encoder) != nil else {
            throw NegotiationError("this FFmpeg has no \(encoder) encoder", hint: "install an FFmpeg built with --enable-\(encoder)")
        }
        var f = StreamFormat(kind: .encodedVideo)
        f.codec = codec
        f.width = input.width
        f.height = input.height
        f.pixelFormat = "yuv420p"
        f.frameRate = input.frameRate
        f.timeBase = input.frameRate.inverse
        f.profile = profile
        f.bitRate = bitRate
        f.sizeVaries = passthrough && input.sizeVaries
        return f
    }

    /// A VBV peak below the average bitrate is refused (with crf there is no average).
    static func checkRates(crf: Double?, maxrate: Int?, bitrate: Int) throws(NegotiationError) {
        if crf == nil, let maxrate, maxrate < bitrate {
            throw NegotiationError("maxrate (\(maxrate / 1000)k) is below the bitrate (\(bitrate / 1000)k)", option: "maxrate")
        }
    }

    /// Size, timing and BT.709 limited-range tags of `input` on an encoder's context.
    static func describe(_ ctx: UnsafeMutablePointer<AVCodecContext>, as input: StreamFormat) {
        ctx.pointee.width = Int32(input.width)
        ctx.pointee.height = Int32(input.height)
        ctx.pointee.time_base = input.frameRate.inverse.av
        ctx.pointee.framerate = input.frameRate.av
        ctx.pointee.sample_aspect_ratio = AVRational(num: 1, den: 1)
        ctx.pointee.color_primaries = AVCOL_PRI_BT709
        ctx.pointee.color_trc = AVCOL_TRC_BT709
        ctx.pointee.colorspace = AVCOL_SPC_BT709
        ctx.pointee.color_range = AVCOL_RANGE_MPEG
    }

    /// Rate control on an encoder's context: constant quality (the private option `crf`) or the
    /// average bitrate, the VBV peak (`maxrate`, default the bitrate without crf) and its
    /// buffer (`bufsize`, default `bufferSeconds` of the peak).
    static func rateControl(_ ctx: UnsafeMutablePointer<AVCodecContext>, options: inout [String: String], bitrate: Int, crf: Double?,
                            maxrate: Int?, bufsize: Int?, bufferSeconds: Int) {
        if let crf {
            options["crf"] = String(crf)
        } else {
            ctx.pointee.bit_rate = Int64(bitrate)
        }
        let peak = maxrate ?? (crf != nil ? 0 : bitrate)
        guard peak > 0 else { return }
        ctx.pointee.rc_max_rate = Int64(peak)
        ctx.pointee.rc_buffer_size = Int32(clamping: bufsize ?? bufferSeconds * peak)
    }
}

extension PictureEncoding {
    /// Encoder timestamps (in 1/frame rate) that always move forward: x264 and x265 refuse one
    /// that does not, and a jittery source can round onto the last one.
    struct RisingTimestamps {
        private(set) var last = Int64.min

        mutating func next(_ frame: Frame, in timeBase: Rational) -> Int64 {
            var pts = frame.pts == avg_nopts() ? last + 1 : Rational.rescale(frame.pts, from: frame.timeBase, to: timeBase)
            if last != Int64.min && pts <= last { pts = last + 1 }
            last = pts
            return pts
        }
    }

    /// `shown` (the picture to encode in `frame`'s place) as the encoder takes it: converted
    /// (scaled, to `format`, limited range) when it is not already, else a reference to it.
    static func fitted(_ shown: Frame, for frame: Frame, width: Int32, height: Int32, format: AVPixelFormat,
                       converter: inout PictureConverter?) throws -> Frame {
        if shown.av.pointee.format != format.rawValue || shown.av.pointee.width != width || shown.av.pointee.height != height
            || shown.av.pointee.color_range == AVCOL_RANGE_JPEG {
            if converter == nil { converter = try PictureConverter(width: Int(width), height: Int(height), format: format) }
            return Frame(owning: try converter!.convert(shown.av), timeBase: frame.timeBase)
        }
        // A picture shown again (a card held on) goes in under its own header.
        return shown === frame ? frame : shown.ref()
    }
}
