import CFFmpeg
import Foundation

/// FFmpeg's own log goes to stderr; a tool prints its own messages and keeps FFmpeg's for errors.
/// Either way each line passes through `Redaction.text`: FFmpeg's protocols quote the URL they
/// failed on, stream key and SRT passphrase included.
public enum FFmpegLog {
    public static func errorsOnly() { avg_log_quiet(); redacting() }
    public static func verbose() { av_log_set_level(AV_LOG_INFO); redacting() }

    static func redacting() {
        av_log_set_callback { avcl, level, format, args in
            guard level <= av_log_get_level(), let format, let args else { return }
            var line = [CChar](repeating: 0, count: 2048)
            var prefix: Int32 = 1
            av_log_format_line2(avcl, level, format, args, &line, Int32(line.count), &prefix)
            let text = Redaction.text(String(cString: line))
            FileHandle.standardError.write(Data(text.utf8))
        }
    }
}
