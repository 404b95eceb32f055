import Foundation

/// IVF, libvpx's and libaom's plain container (a 32-byte header, then each frame after its
/// 4-byte little-endian size and 8-byte time): how the VP9 and AV1 tests get an encoder's real
/// frames out of ffmpeg and hand reassembled ones back to ffprobe.
enum IvfFile {
    static func frames(_ path: String) throws -> [[UInt8]] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        guard bytes.count >= 32, bytes.starts(with: Array("DKIF".utf8)) else { return [] }
        var frames: [[UInt8]] = [], at = Int(bytes[6]) | Int(bytes[7]) << 8
        while bytes.count - at >= 12 {
            let size = (0..<4).reduce(0) { $0 | Int(bytes[at + $1]) << (8 * $1) }
            guard bytes.count - at - 12 >= size else { break }
            frames.append(Array(bytes[(at + 12)..<(at + 12 + size)]))
            at += 12 + size
        }
        return frames
    }

    static func write(_ frames: [[UInt8]], fourcc: String, width: Int, height: Int, to path: String) {
        func le(_ value: Int, _ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
        var out = Array("DKIF".utf8) + le(0, 2) + le(32, 2) + Array(fourcc.utf8) + le(width, 2) + le(height, 2)
        out += le(30, 4) + le(1, 4) + le(frames.count, 4) + le(0, 4)
        for (index, frame) in frames.enumerated() { out += le(frame.count, 4) + le(index, 8) + frame }
        _ = FileManager.default.createFile(atPath: path, contents: Data(out))
    }

    /// What ffprobe decodes of `frames` written as IVF at `path`: "codec,width,height,pictures".
    static func decoded(_ frames: [[UInt8]], fourcc: String, at path: String) throws -> String {
        write(frames, fourcc: fourcc, width: 320, height: 240, to: path)
        return try TestSupport.shell(["ffprobe", "-v", "error", "-count_frames", "-show_entries", "stream=codec_name,width,height,nb_read_frames",
                                      "-of", "csv=p=0", path]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `frames` pictures of ffmpeg's test pattern at 320x240, 30 a second, a keyframe every 30.
    static func encode(_ codec: [String], frames: Int, to path: String) throws {
        try TestSupport.ffmpeg(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-frames:v", "\(frames)", "-g", "30", "-b:v", "500k"] + codec + [path])
    }
}
