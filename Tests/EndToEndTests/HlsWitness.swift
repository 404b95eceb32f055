import Foundation
import XCTest

/// Reads what an `hls` sink wrote the way a player does, with ffprobe/ffmpeg as the witnesses.
enum HlsWitness {
    struct Segment {
        var duration: Double
        var uri: String
    }

    struct MediaPlaylist {
        var segments: [Segment]
        var mediaSequence: Int
        var initURI: String?
        var ended: Bool
        var text: String
    }

    static func mediaPlaylist(_ path: String) throws -> MediaPlaylist {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var segments: [Segment] = [], pending: Double?, sequence = 0, initURI: String?
        for line in text.split(separator: "\n").map(String.init) {
            if line.hasPrefix("#EXTINF:") {
                pending = Double(line.dropFirst(8).split(separator: ",").first ?? "")
            } else if line.hasPrefix("#EXT-X-MEDIA-SEQUENCE:") {
                sequence = Int(line.dropFirst(22)) ?? -1
            } else if line.hasPrefix("#EXT-X-MAP:URI=\"") {
                initURI = String(line.dropFirst(16).dropLast())
            } else if !line.hasPrefix("#"), !line.isEmpty, let d = pending {
                segments.append(Segment(duration: d, uri: line))
                pending = nil
            }
        }
        return MediaPlaylist(segments: segments, mediaSequence: sequence, initURI: initURI, ended: text.contains("#EXT-X-ENDLIST"), text: text)
    }

    /// The variants of a master playlist: (RESOLUTION, media playlist URI, the whole STREAM-INF line).
    static func variants(_ master: String) throws -> [(resolution: String, uri: String, info: String)] {
        let lines = try String(contentsOfFile: master, encoding: .utf8).split(separator: "\n").map(String.init)
        return lines.indices.compactMap { i -> (String, String, String)? in
            guard lines[i].hasPrefix("#EXT-X-STREAM-INF:"), i + 1 < lines.count else { return nil }
            let resolution = lines[i].components(separatedBy: "RESOLUTION=").dropFirst().first?.split(separator: ",").first.map(String.init) ?? ""
            return (resolution, lines[i + 1], lines[i])
        }
    }

    /// One segment as a player gets it: fMP4 needs its init section in front.
    static func playable(_ segment: String, initSection: String?, in scratch: String) throws -> String {
        guard let initSection else { return segment }
        let joined = scratch + "/" + UUID().uuidString + ".mp4"
        var data = try Data(contentsOf: URL(fileURLWithPath: initSection))
        data.append(try Data(contentsOf: URL(fileURLWithPath: segment)))
        try data.write(to: URL(fileURLWithPath: joined))
        return joined
    }

    /// Decodes every frame of `input` (a playlist or a file); returns ffmpeg's error output and the frame count.
    static func decode(_ input: String) throws -> (errors: String, frames: Int) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-nostdin", "-v", "error", "-i", input, "-map", "0:v:0",
                       "-f", "framemd5", "-"]
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        // A decoder waiting for a live playlist to grow would wait forever: never longer than this.
        let process = p
        DispatchQueue.global().asyncAfter(deadline: .now() + 120) { if process.isRunning { process.terminate() } }
        let errors = CLI.DataBox()
        err.fileHandleForReading.readabilityHandler = { h in errors.append(h.availableData) }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        err.fileHandleForReading.readabilityHandler = nil
        errors.append(err.fileHandleForReading.readDataToEndOfFile())
        let frames = String(decoding: data, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.count
        return (errors.string + (p.terminationStatus == 0 ? "" : "exit \(p.terminationStatus)"), frames)
    }

    /// Presentation times of the keyframes of `input`'s video, in seconds.
    static func keyframeTimes(_ input: String) throws -> [Double] {
        let out = try CLI.shell(["ffprobe", "-v", "error", "-skip_frame", "nokey", "-select_streams", "v:0",
                                 "-show_entries", "frame=pts_time", "-of", "csv=p=0", input])
        return out.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces.union(.punctuationCharacters))) }
    }

    /// Whether the first frame of `input` is a keyframe (ffprobe's key_frame of frame 0).
    static func startsOnKeyframe(_ input: String) throws -> Bool {
        let out = try CLI.shell(["ffprobe", "-v", "error", "-select_streams", "v:0", "-read_intervals", "%+#1",
                                 "-show_entries", "frame=key_frame", "-of", "csv=p=0", input])
        return out.split(separator: "\n").first.map { $0.trimmingCharacters(in: .whitespaces.union(.punctuationCharacters)) } == "1"
    }

    /// Video duration in seconds of a playlist or file, by decoding: first picture to the end of
    /// the last (its length taken as the median interval; fMP4 frames carry no duration here).
    static func videoSpan(_ input: String) throws -> Double {
        let out = try CLI.shell(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts_time",
                                 "-of", "csv=p=0", input])
        let times = out.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces.union(.punctuationCharacters))) }
        guard let first = times.first, let last = times.last, times.count > 1 else { return 0 }
        let steps = zip(times, times.dropFirst()).map { $1 - $0 }.sorted()
        return last - first + steps[steps.count / 2]
    }

    /// Every decoded picture of `input` as gray `width`x`height`, one per stored frame (no frame
    /// rate conversion: index i is the i-th picture written).
    static func grayPictures(_ input: String, width: Int, height: Int) throws -> [[UInt8]] {
        let data = try CLI.capture(["ffmpeg", "-v", "error", "-i", input, "-map", "0:v:0", "-fps_mode", "passthrough",
                                    "-f", "rawvideo", "-pix_fmt", "gray", "-s", "\(width)x\(height)", "-"])
        let n = width * height
        return stride(from: 0, to: data.count - n + 1, by: n).map { Array(data[$0..<$0 + n]) }
    }

    /// A live playlist (no end mark) as a finished one, so a decoder reads it once instead of
    /// waiting for more segments: a copy beside it with #EXT-X-ENDLIST appended.
    static func ended(_ playlist: String) throws -> String {
        var text = try String(contentsOfFile: playlist, encoding: .utf8)
        if text.contains("#EXT-X-ENDLIST") { return playlist }
        text += "#EXT-X-ENDLIST\n"
        let copy = (playlist as NSString).deletingLastPathComponent + "/check-ended.m3u8"
        try text.write(toFile: copy, atomically: true, encoding: .utf8)
        return copy
    }

    /// A small ladder for realtime runs on a loaded machine: a 360x640 portrait testsrc turned
    /// upright, two renditions (360p, 180p), 1 s keyframes, 1 s segments, AAC.
    static func smallLadder(master: String, window: String, extra: String = "", privacy: String = "") -> String {
        """
        pipeline: small-ladder
        duration: 60s
        \(extra)
        nodes:
          screen:  {type: testsrc, size: 360x640, rate: 30, orientation: right}
          tone:    {type: tone, freq: 440, rate: 44100, channels: 2}
          upright: {type: orient, in: screen}
          privacy: {type: privacy, in: upright, image: \(CLI.packageRoot)/assets/privacy.png\(privacy)}
          fit360:  {type: resize, in: privacy, size: 640x360, mode: fit}
          fit180:  {type: resize, in: privacy, size: 320x180, mode: fit}
          v360:    {type: h264, in: fit360, bitrate: 600k, gop: 30, keyframes: fixed, preset: ultrafast}
          v180:    {type: h264, in: fit180, bitrate: 200k, gop: 30, keyframes: fixed, preset: ultrafast}
          audio:   {type: aac, in: tone, bitrate: 64k}
          out:     {type: hls, in: [v360, v180, audio], path: \(master), segment: 1s, window: \(window)}
        """
    }
}
