import AVGraph
import AVGraphNodes
import CFFmpeg
import Foundation

/// Plays a media file into a `socket` source the way a phone's broadcast extension would:
/// portrait NV12 screen buffers tagged with the orientation the phone is held in, app audio
/// (optionally big-endian), a microphone (an 880 Hz tone) that starts late, stalls where the
/// screen sends nothing, and dropped connections that come back. Paced in realtime.
final class PhoneFeed {
    /// The privacy card in-band over a span of media time, as an app's sensitive screen does.
    struct PrivacySpan { var span: TimeSpan; var card: String? }

    struct Options {
        var socket: String
        var media: String
        var size = (width: 720, height: 1280)
        var orientation: [OrientationChange] = []
        var stalls: [TimeSpan] = []
        var disconnects: [TimeSpan] = []
        var micDelay: Double?
        /// Media time before which no pictures are sent (the audio leads by this much).
        var audioLead = 0.0
        /// Media time before which no app audio is sent (the video leads by this much).
        var videoLead = 0.0
        var bigEndian = false
        var sendEnd = true
        var privacy: [PrivacySpan] = []
        var duration: Double?
        var connectTimeout = 10.0
    }

    let o: Options
    private var fd: Int32 = -1
    private var start = 0.0
    private let rate = 48000
    private var micPosition: Int64 = 0
    private var pools: [String: VideoFramePool] = [:]
    private var scalers: [String: (Scaler, PixelRect)] = [:]
    private let buffers: VideoFramePool
    private let nv12 = PixelLayout(AV_PIX_FMT_NV12)!
    private(set) var sent = (video: 0, app: 0, mic: 0)
    /// In-band switches still to send, by time: each goes just before the first picture it covers.
    private lazy var switches: [(time: Double, on: Bool, card: String?)] = o.privacy.flatMap { p -> [(time: Double, on: Bool, card: String?)] in
        [(p.span.at, true, p.card), (p.span.at + p.span.length, false, nil)]
    }.sorted { $0.time < $1.time }

    init(_ options: Options) throws {
        o = options
        buffers = try VideoFramePool(width: o.size.width, height: o.size.height, pixelFormat: AV_PIX_FMT_NV12, alignment: 1)
    }

    func run() throws {
        let decoder = try FileDecoder(path: o.media, audio: AudioShape(rate: rate, channels: 2, format: AV_SAMPLE_FMT_S16))
        try connect()
        start = Monotonic.now
        var disconnects = o.disconnects.sorted { $0.at < $1.at }
        var reconnectAt: Double?
        var ahead = TimeOrder(decoder)
        while let item = try ahead.next() {
            let t = item.time
            if let d = o.duration, t >= d { break }
            try sendMic(upTo: t)
            wait(until: t)
            // A dropped connection: nothing is sent in the span, then the producer comes back.
            if let r = reconnectAt {
                if t < r { continue }
                reconnectAt = nil
                try connect()
                Terminal.err("feed: reconnected at \(String(format: "%.1f", t)) s")
            }
            if let d = disconnects.first, t >= d.at {
                disconnects.removeFirst()
                close(fd)
                fd = -1
                reconnectAt = d.at + d.length
                Terminal.err("feed: disconnected at \(String(format: "%.1f", t)) s for \(d.length) s")
                continue
            }
            switch item {
            case .video(let frame, let time):
                try sendSwitches(upTo: time)
                if time < o.audioLead { continue }
                if o.stalls.contains(where: { $0.contains(time) }) { continue }
                try sendPicture(frame, at: time)
            case .audio(let frame, let time):
                if time < o.videoLead { continue }
                try sendAudio(frame, at: time, type: .app, bigEndian: o.bigEndian)
            }
        }
        if fd >= 0 {
            if o.sendEnd { try send(IngestFraming.encode(IngestFraming.Header(type: .end)), payload: nil) }
            close(fd)
        }
        Terminal.err("feed: sent \(sent.video) pictures, \(sent.app) app and \(sent.mic) mic audio blocks")
    }

    private func connect() throws {
        let deadline = Monotonic.now + o.connectTimeout
        let watch = FolderWatch((o.socket as NSString).deletingLastPathComponent)
        while true {
            do {
                fd = try UnixSocket.connect(path: o.socket)
                return
            } catch {
                // Another user's socket stays another user's: waiting will not make it ours.
                if let e = error as? PrivateSocket.Failure, e.foreign { throw error }
                if Monotonic.now > deadline { throw error }
                // Woken when the socket is bound (again); a refused connect to a socket that is
                // there but not yet listening is looked at again at the deadline.
                watch.wait(until: deadline)
            }
        }
    }

    /// Paces the feed on media time: sleeps until the absolute monotonic moment `start + t` (the
    /// feeder's own realtime tick; nothing else can make it due sooner).
    private func wait(until t: Double) {
        let due = start + t
        guard due > Monotonic.now else { return }
        var at = timespec(tv_sec: Int(due), tv_nsec: Int((due - due.rounded(.down)) * 1e9))
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, nil) == EINTR {}
    }

    private func send(_ header: [UInt8], payload: UnsafeRawBufferPointer?) throws {
        guard fd >= 0 else { return }
        try header.withUnsafeBytes { try UnixSocket.writeAll(fd, $0) }
        if let payload { try UnixSocket.writeAll(fd, payload) }
    }

    /// The decoded picture as the phone's portrait screen buffer: fitted into the upright screen
    /// the tag implies, then stored turned so that applying the tag stands it upright again.
    private func sendPicture(_ frame: Frame, at time: Double) throws {
        let tag = o.orientation.orientation(at: time)
        let upright = tag.uprightSize(width: o.size.width, height: o.size.height)
        let key = "\(upright.width)x\(upright.height)"
        if pools[key] == nil { pools[key] = try VideoFramePool(width: upright.width, height: upright.height, pixelFormat: AV_PIX_FMT_NV12) }
        let skey = "\(frame.width)x\(frame.height)/\(frame.av.pointee.format)->\(key)"
        if scalers[skey] == nil {
            let place = Placement.place(inWidth: frame.width, inHeight: frame.height, inAlign: 2, outWidth: upright.width,
                                        outHeight: upright.height, outAlign: 2, mode: .fit)
            let color = Scaler.colorDetails(of: frame)
            scalers[skey] = (try Scaler(from: frame.width, frame.height, frame.pixelFormat, to: place.target.width, place.target.height,
                                        AV_PIX_FMT_NV12, quality: .bilinear, sourceFullRange: color.fullRange, sourceMatrix: color.matrix),
                             place.target)
        }
        let (scaler, target) = scalers[skey]!
        let screen = try pools[key]!.frame(timeBase: Rational(1, 1_000_000))
        try scaler.scale(frame, PixelRect(x: 0, y: 0, width: frame.width, height: frame.height), into: screen, target)
        screen.fill(around: target, with: nv12.elements(for: RGB(r: 0, g: 0, b: 0)), layout: nv12)
        let stored: Frame
        if tag == .up {
            stored = try buffers.frame(timeBase: Rational(1, 1_000_000))
            try stored.makeWritable()
            av_image_copy(stored.dataPointers, stored.lineSizes,
                          UnsafeMutableRawPointer(screen.dataPointers).assumingMemoryBound(to: UnsafePointer<UInt8>?.self),
                          screen.lineSizes, AV_PIX_FMT_NV12, Int32(o.size.width), Int32(o.size.height))
        } else {
            stored = try buffers.frame(timeBase: Rational(1, 1_000_000))
            PictureTurn.upright(screen, into: stored, map: tag.inverse.storage, layout: nv12)
        }
        let header = IngestFraming.Header.video(.nv12, width: o.size.width, height: o.size.height,
                                                timestamp: Int64((time * 1e6).rounded()), orientation: tag)
        try send(IngestFraming.encode(header), payload: UnsafeRawBufferPointer(start: stored.plane(0), count: header.payloadSize))
        sent.video += 1
    }

    private func sendAudio(_ frame: Frame, at time: Double, type: IngestFraming.MessageType, bigEndian: Bool) throws {
        let bytes = frame.sampleCount * frame.channels * 2
        if bigEndian != PCM.hostIsBigEndian { PCM.swapBytes(frame.audioData(), byteCount: bytes, sampleSize: 2) }
        let header = IngestFraming.Header.audio(type, format: .s16, rate: frame.sampleRate, channels: frame.channels, bigEndian: bigEndian,
                                                timestamp: Int64((time * 1e6).rounded()), payloadSize: bytes)
        try send(IngestFraming.encode(header), payload: UnsafeRawBufferPointer(start: frame.audioData(), count: bytes))
        if type == .app { sent.app += 1 } else { sent.mic += 1 }
    }

    /// Privacy messages due at or before the picture about to be sent, stamped with their own
    /// time (pictures at or after it are covered; those before are not, wherever they queue).
    private func sendSwitches(upTo t: Double) throws {
        // While disconnected the switch waits: it goes out ahead of the first picture after the reconnect.
        while fd >= 0, let s = switches.first, s.time <= t + 1e-9 {
            switches.removeFirst()
            let name = Array((s.card ?? "").utf8)
            let header = IngestFraming.Header.privacy(on: s.on, timestamp: Int64((s.time * 1e6).rounded()), cardBytes: name.count)
            try name.withUnsafeBytes { try send(IngestFraming.encode(header), payload: name.isEmpty ? nil : $0) }
        }
    }

    /// The microphone: an 880 Hz tone, mono, from `micDelay` on, in 1024-sample blocks.
    private func sendMic(upTo t: Double) throws {
        guard let delay = o.micDelay else { return }
        if micPosition == 0 { micPosition = Int64((delay * Double(rate)).rounded()) }
        var samples = [Int16](repeating: 0, count: 1024)
        while Double(micPosition) / Double(rate) <= t {
            let time = Double(micPosition) / Double(rate)
            for i in 0..<1024 {
                samples[i] = Int16(0.25 * 32767 * sin(2 * Double.pi * 880 * Double(micPosition + Int64(i)) / Double(rate)))
            }
            micPosition += 1024
            if o.disconnects.contains(where: { $0.contains(time) }) || fd < 0 { continue }
            let header = IngestFraming.Header.audio(.mic, format: .s16, rate: rate, channels: 1, bigEndian: false,
                                                    timestamp: Int64((time * 1e6).rounded()), payloadSize: 2048)
            try samples.withUnsafeBytes { try send(IngestFraming.encode(header), payload: $0) }
            sent.mic += 1
        }
    }
}

/// Decoded items in time order across streams, as a capture device delivers them: a video
/// decoder gives its first pictures only after a few packets (frame threads), by which time the
/// audio beside them has been decoded; sent in decoding order, a session would open with audio
/// the picture of the same instant only follows tens of milliseconds later.
struct TimeOrder {
    private let decoder: FileDecoder
    private var pending: [FileDecoder.Item] = []
    private var ended = false
    /// How far ahead of the earliest pending item decoding may run to find the other stream.
    private let horizon = 0.5

    init(_ decoder: FileDecoder) { self.decoder = decoder }

    mutating func next() throws -> FileDecoder.Item? {
        while !ended {
            let hasVideo = pending.contains { if case .video = $0 { true } else { false } }
            let hasAudio = pending.contains { if case .audio = $0 { true } else { false } }
            let span = (pending.map(\.time).max() ?? 0) - (pending.map(\.time).min() ?? 0)
            if hasVideo && hasAudio || span > horizon { break }
            guard let item = try decoder.next() else { ended = true; break }
            pending.append(item)
        }
        guard let i = pending.indices.min(by: { pending[$0].time < pending[$1].time }) else { return nil }
        return pending.remove(at: i)
    }
}

extension FileDecoder.Item {
    var time: Double {
        switch self {
        case .video(_, let t), .audio(_, let t): return t
        }
    }
}

extension Orientation {
    /// The tag that undoes this one: quarter turns swap, the rest undo themselves.
    var inverse: Orientation {
        switch self {
        case .left: return .right
        case .right: return .left
        default: return self
        }
    }
}
