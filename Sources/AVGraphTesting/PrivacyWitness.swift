import Foundation

/// Measures a privacy switch on decoded media: a producer sends pictures that each carry their
/// own number (ten black or white blocks across the middle, a pattern no card resembles) and
/// switches at random times; the recording's pictures, decoded to RGB, are each a numbered
/// screen or a solid card, and every one is checked against the switches.
public struct PrivacyWitness: Sendable {
    public struct Switch: Sendable {
        public var time: Double
        public var on: Bool
        public var card: String?
        public init(time: Double, on: Bool, card: String?) { self.time = time; self.on = on; self.card = card }
    }

    public enum Shown: Equatable, Sendable { case screen(Int), card(String), unknown }

    public struct Count: Sendable, CustomStringConvertible {
        public var pictures = 0, covered = 0, due = 0, leaked = 0, wronglyCovered = 0, unknown = 0
        /// The first few pictures that were not as due, for a failure's message.
        public var mismatches: [String] = []
        public var description: String {
            "pictures \(pictures), covered \(covered) (due \(due)), leaked \(leaked), wrongly covered \(wronglyCovered), unknown \(unknown)"
                + (mismatches.isEmpty ? "" : "; " + mismatches.joined(separator: "; "))
        }
    }

    public static let width = 320, height = 240
    public let rate: Double
    public let switches: [Switch]
    /// The card a switch that names none shows.
    public let defaultCard: String

    public init(rate: Double = 30, switches: [Switch], defaultCard: String) {
        self.rate = rate
        self.switches = switches.sorted { $0.time < $1.time }
        self.defaultCard = defaultCard
    }

    /// `count` switches at random times in `span` (not on picture times), on or off, naming one of `cards` or none.
    public static func randomSwitches(_ count: Int, in span: ClosedRange<Double>, cards: [String], seed: UInt64) -> [Switch] {
        var state = seed
        func unit() -> Double {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Double((z ^ (z >> 31)) >> 11) / Double(1 << 53)
        }
        let names: [String?] = [nil] + cards
        return (0..<count).map { _ in
            Switch(time: span.lowerBound + unit() * (span.upperBound - span.lowerBound), on: unit() < 0.5,
                   card: names[min(names.count - 1, Int(unit() * Double(names.count)))])
        }.sorted { $0.time < $1.time }
    }

    /// What picture `i` (at i/rate on the producer's clock) must show: nil for the screen, else a card.
    public func expected(_ i: Int) -> String? {
        let t = Double(i) / rate
        var state: Switch?
        for s in switches where s.time <= t + 1e-9 { state = s }
        guard let s = state, s.on else { return nil }
        return s.card ?? defaultCard
    }

    /// NV12 picture `i` (Y then interleaved CbCr, no padding): block b white when bit b of i is set.
    public static func picture(_ i: Int) -> [UInt8] {
        var y = [UInt8](repeating: 16, count: width * height)
        for bit in 0..<10 where (i >> bit) & 1 == 1 {
            for row in 96..<144 { for col in (bit * 32 + 2)..<(bit * 32 + 30) { y[row * width + col] = 235 } }
        }
        return y + [UInt8](repeating: 128, count: width * height / 2)
    }

    /// One decoded rgb24 picture of `width`x`height`: a card by its colour (`cards`: name -> RGB), else the number its blocks spell.
    public static func classify(_ rgb: ArraySlice<UInt8>, cards: [String: (r: Int, g: Int, b: Int)]) -> Shown {
        func px(_ x: Int, _ y: Int) -> (Int, Int, Int) {
            let o = rgb.startIndex + (y * width + x) * 3
            return (Int(rgb[o]), Int(rgb[o + 1]), Int(rgb[o + 2]))
        }
        let c = px(160, 40)
        for (name, k) in cards where abs(c.0 - k.r) < 40 && abs(c.1 - k.g) < 40 && abs(c.2 - k.b) < 40 { return .card(name) }
        guard abs(c.0 - c.1) < 20 && abs(c.1 - c.2) < 20 else { return .unknown }
        var n = 0
        for bit in 0..<10 where px(bit * 32 + 16, 120).1 > 128 { n |= 1 << bit }
        return .screen(n)
    }

    /// Decodes a recording's first video stream with the ffmpeg CLI (an independent witness):
    /// each picture's time and what it shows.
    public static func decode(_ path: String, cards: [String: (r: Int, g: Int, b: Int)]) throws -> [(time: Double, shown: Shown)] {
        func ffmpeg(_ args: [String]) throws -> Data {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = args
            let out = Pipe()
            p.standardOutput = out
            p.standardError = FileHandle.nullDevice
            try p.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            return data
        }
        let times = String(decoding: try ffmpeg(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts_time",
                                                  "-of", "csv=p=0", path]), as: UTF8.self)
            // A frame with side data prints its time as "T," (and the side data on a line of its own).
            .split(separator: "\n").compactMap { $0.split(separator: ",").first.flatMap { Double($0) } }
        let data = [UInt8](try ffmpeg(["ffmpeg", "-v", "error", "-i", path, "-map", "0:v:0", "-f", "rawvideo", "-pix_fmt", "rgb24",
                                       "-s", "\(width)x\(height)", "-"]))
        let size = width * height * 3
        return stride(from: 0, to: data.count - size + 1, by: size).enumerated().map { k, start in
            (k < times.count ? times[k] : -1, classify(data[start..<start + size], cards: cards))
        }
    }

    /// Every decoded picture (its time, what it shows) against the switches. A card's picture
    /// number comes from its time and the constant offset the numbered screens show.
    public func count(_ shown: [(time: Double, shown: Shown)], pushed: Int) -> Count {
        var offsets: [Int: Int] = [:]
        for (t, s) in shown { if case .screen(let n) = s { offsets[Int((t * rate).rounded()) - n, default: 0] += 1 } }
        let offset = offsets.max { $0.value < $1.value }?.key ?? 0
        var c = Count()
        c.pictures = shown.count
        c.due = (0..<pushed).filter { expected($0) != nil }.count
        for (t, s) in shown {
            switch s {
            case .screen(let n):
                if let due = expected(n) {
                    c.leaked += 1
                    if c.mismatches.count < 5 { c.mismatches.append("picture \(n) at \(t) s shown, card \(due) due") }
                }
            case .card(let name):
                c.covered += 1
                let n = Int((t * rate).rounded()) - offset
                if expected(n) != name {
                    c.wronglyCovered += 1
                    if c.mismatches.count < 5 {
                        let near = switches.filter { abs($0.time - Double(n) / rate) < 0.1 }.map { "\($0.on ? "on" : "off") \($0.card ?? "-") at \($0.time)" }
                        c.mismatches.append("picture \(n) at \(t) s: card \(name), due \(expected(n) ?? "screen") (switches near: \(near))")
                    }
                }
            case .unknown: c.unknown += 1
            }
        }
        return c
    }
}
