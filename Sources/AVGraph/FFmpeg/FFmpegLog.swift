import CFFmpeg
import Foundation
import Synchronization

/// FFmpeg's own log. By default it goes to stderr as FFmpeg writes it, errors only. A tool that
/// prints its own messages routes it (`route`): every line reaches a handler with its level and
/// the node whose thread logged it, so "which node?" has an answer when a codec complains.
/// Either way each line passes through `Redaction.text`: FFmpeg's protocols quote the URL they
/// failed on, stream key and SRT passphrase included.
public enum FFmpegLog {
    /// One line FFmpeg logged.
    public struct Line: Sendable {
        /// FFmpeg's level: `AV_LOG_ERROR` (16), `AV_LOG_WARNING` (24), `AV_LOG_INFO` (32), `AV_LOG_VERBOSE` (40), `AV_LOG_DEBUG` (48).
        public var level: Int32
        /// The node running on the thread that logged it (see `tag`), else the thread's name.
        public var node: String?
        /// The FFmpeg component (`libx264`, `mov,mp4,m4a,3gp,3g2,mj2`), if it said.
        public var component: String?
        public var text: String
    }

    public static func errorsOnly() { avg_log_quiet(); redacting() }
    public static func verbose() { av_log_set_level(AV_LOG_INFO); redacting() }

    static func redacting() {
        av_log_set_callback { avcl, level, format, args in
            guard level <= av_log_get_level(), let format, let args else { return }
            var line = [CChar](repeating: 0, count: 2048)
            var prefix: Int32 = 1
            av_log_format_line2(avcl, level, format, args, &line, Int32(line.count), &prefix)
            let text = Redaction.text(String(filledBuffer: line))
            FileHandle.standardError.write(Data(text.utf8))
        }
    }

    private static let handler = Mutex<(@Sendable (Line) -> Void)?>(nil)

    /// Sends every line at `maxLevel` or more severe to `handler` (from whatever thread logged it).
    public static func route(maxLevel: Int32, to handler: @escaping @Sendable (Line) -> Void) {
        self.handler.withLock { $0 = handler }
        av_log_set_level(maxLevel)
        av_log_set_callback { avcl, level, format, args in
            guard level <= av_log_get_level(), let format, let args else { return }
            var buffer = [CChar](repeating: 0, count: 2048)
            var printPrefix: Int32 = 0
            _ = av_log_format_line2(avcl, level, format, args, &buffer, Int32(buffer.count), &printPrefix)
            let text = Redaction.text(String(filledBuffer: buffer)).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !text.isEmpty else { return }
            FFmpegLog.deliver(Line(level: level, node: FFmpegLog.currentTag, component: FFmpegLog.component(avcl), text: text))
        }
    }

    private static func deliver(_ line: Line) {
        handler.withLock { $0 }?(line)
    }

    private static func component(_ avcl: UnsafeMutableRawPointer?) -> String? {
        guard let avcl, let cls = avcl.assumingMemoryBound(to: UnsafePointer<AVClass>?.self).pointee,
              let itemName = cls.pointee.item_name, let name = itemName(avcl) else { return nil }
        return String(cString: name)
    }

    /// A node's name as a thread's tag: made once per name and kept, so a thread switching nodes
    /// (one running several, `SharedThread`) switches tags for the price of a thread-specific pointer.
    public final class Tag: Sendable {
        public let node: String
        fileprivate init(_ node: String) { self.node = node }
    }

    /// The calling thread's tag, unretained: tags live as long as the process.
    private static let tagKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Every tag made, one per name, kept for the process (node names are few).
    private static let madeTags = Mutex<[String: Tag]>([:])

    /// The tag of node `name`.
    public static func tag(for name: String) -> Tag {
        madeTags.withLock { tags in
            if let made = tags[name] { return made }
            let made = Tag(name)
            tags[name] = made
            return made
        }
    }

    /// Names the node the calling thread works for: FFmpeg lines logged on it carry that name.
    public static func tag(node: String?) { tag(node.map { tag(for: $0) }) }

    /// The same with a tag already looked up (a thread that switches nodes often).
    public static func tag(_ tag: Tag?) {
        pthread_setspecific(tagKey, tag.map { UnsafeRawPointer(Unmanaged.passUnretained($0).toOpaque()) })
    }

    static var currentTag: String? {
        if let p = pthread_getspecific(tagKey) { return Unmanaged<Tag>.fromOpaque(p).takeUnretainedValue().node }
        return Thread.current.name.flatMap { $0.isEmpty ? nil : $0 }
    }
}
