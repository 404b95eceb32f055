import ArgumentParser
import AVGraph
import Foundation

struct FeedCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "feed",
        abstract: "Play a media file into a socket source as a phone's broadcast extension would.",
        discussion: """
        Decodes MEDIAFILE and sends its video as portrait NV12 screen buffers with an orientation tag
        and its audio as app audio (s16 stereo 48 kHz), paced in realtime, in the framing of
        docs/INGEST.md; exits at the file's end (after an 'end' message unless --no-end).
        SOURCE is a socket path (with a '/'), or PIPELINE.NODE, or PIPELINE when that pipeline has one
        socket source: its default socket in the private runtime folder. A socket owned by another
        user is refused.
        Example: avgraph feed phone-socket clip.mp4 --orientation 0s:up,5s:left --stall 3s:2s --mic-delay 3s
        """
    )

    @Argument(help: "The socket source: a path, PIPELINE.NODE or PIPELINE.")
    var socket: String

    @Argument(help: "The media file to play.")
    var media: String

    @Option(help: "Screen buffer size (portrait).")
    var size = "720x1280"

    @Option(help: "Orientation schedule: AT:VALUE,... e.g. 0s:up,5s:left (the phone turned at 5 s).")
    var orientation = "0s:up"

    @Option(help: "A span with no pictures sent (a still screen): AT:FOR, e.g. 4s:2s (repeatable).")
    var stall: [String] = []

    @Option(name: .customLong("mic-delay"), help: "Send a microphone (880 Hz tone, mono) from this time on, e.g. 3s.")
    var micDelay: String?

    @Option(name: .customLong("audio-lead"), help: "Start the pictures this much media time after the audio, e.g. 500ms.")
    var audioLead: String?

    @Option(name: .customLong("video-lead"), help: "Start the app audio this much media time after the pictures, e.g. 200ms.")
    var videoLead: String?

    @Flag(name: .customLong("big-endian"), help: "Send app audio as big-endian s16.")
    var bigEndian = false

    @Option(help: "Drop the connection at AT for FOR, then reconnect: AT:FOR, e.g. 5s:2s (repeatable).")
    var disconnect: [String] = []

    @Flag(name: .customLong("no-end"), help: "Do not send the end message at the file's end (just close).")
    var noEnd = false

    @Option(help: "Stop after this much media time.")
    var duration: String?

    @Option(help: ArgumentHelp("Privacy card in-band from START for DURATION, naming a card of the privacy node's cards: START:DURATION[:CARD], e.g. 10s:5s:typing (repeatable).",
                               valueName: "START:DURATION[:CARD]"))
    var privacy: [String] = []

    func parseSpan(_ s: String, _ what: String) throws -> TimeSpan {
        let parts = s.split(separator: ":")
        guard parts.count == 2, let at = ValueSyntax.duration(String(parts[0])), let length = ValueSyntax.duration(String(parts[1])) else {
            throw ValidationError("--\(what) takes AT:FOR like 5s:2s, got '\(s)'")
        }
        return TimeSpan(at: at, length: length)
    }

    func options() throws -> PhoneFeed.Options {
        var o = PhoneFeed.Options(socket: socket, media: media)
        guard let s = ValueSyntax.size(size), s.width % 2 == 0, s.height % 2 == 0 else { throw ValidationError("--size takes an even WxH, got '\(size)'") }
        o.size = s
        o.orientation = try orientation.split(separator: ",").map { entry in
            let parts = entry.split(separator: ":")
            guard parts.count == 2, let at = ValueSyntax.duration(String(parts[0])), let value = Orientation(rawValue: String(parts[1])) else {
                throw ValidationError("--orientation takes AT:VALUE,... like 0s:up,5s:left, got '\(entry)'")
            }
            return OrientationChange(at: at, value: value)
        }.sorted { $0.at < $1.at }
        o.stalls = try stall.map { try parseSpan($0, "stall") }
        o.disconnects = try disconnect.map { try parseSpan($0, "disconnect") }
        if let micDelay {
            guard let d = ValueSyntax.duration(micDelay) else { throw ValidationError("--mic-delay takes a duration, got '\(micDelay)'") }
            o.micDelay = d
        }
        if let duration {
            guard let d = ValueSyntax.duration(duration) else { throw ValidationError("--duration takes a duration, got '\(duration)'") }
            o.duration = d
        }
        o.privacy = try privacy.map { entry in
            let parts = entry.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard (2...3).contains(parts.count), let span = try? parseSpan(parts[0] + ":" + parts[1], "privacy") else {
                throw ValidationError("--privacy takes START:DURATION[:CARD] like 10s:5s:typing, got '\(entry)'")
            }
            let card = parts.count == 3 ? parts[2] : nil
            if let card, !PrivacyMark.isValidCardName(card) {
                throw ValidationError("--privacy: card name '\(card)' must be 1 to 64 of A-Z a-z 0-9 - _")
            }
            return PhoneFeed.PrivacySpan(span: span, card: card)
        }
        for (value, flag) in [(audioLead, "audio-lead"), (videoLead, "video-lead")] {
            guard let value else { continue }
            guard let d = ValueSyntax.duration(value) else { throw ValidationError("--\(flag) takes a duration, got '\(value)'") }
            if flag == "audio-lead" { o.audioLead = d } else { o.videoLead = d }
        }
        o.bigEndian = bigEndian
        o.sendEnd = !noEnd
        return o
    }

    func validate() throws { _ = try options() }

    func run() throws {
        do {
            var o = try options()
            o.socket = try FeedTarget.path(socket, wait: o.connectTimeout)
            try PhoneFeed(o).run()
        } catch {
            Terminal.err("error: \(error)")
            throw ExitCode(1)
        }
    }
}
