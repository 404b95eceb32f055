import CFFmpeg

/// FFmpeg's own log goes to stderr; a tool prints its own messages and keeps FFmpeg's for errors.
public enum FFmpegLog {
    public static func errorsOnly() { avg_log_quiet() }
    public static func verbose() { av_log_set_level(AV_LOG_INFO) }
}
