import CFFmpeg

/// avgraph's version, the one place it is written: `avgraph --version` prints it.
public enum AVGraphVersion {
    public static let string = "0.9.0"

    /// The version with the plugin API and the FFmpeg libraries it runs on.
    public static var long: String {
        func v(_ n: UInt32) -> String { "\(n >> 16).\((n >> 8) & 0xff).\(n & 0xff)" }
        return "avgraph \(string) (plugin API \(PluginAPI.version); libavcodec \(v(avcodec_version())), libavformat \(v(avformat_version())))"
    }
}
