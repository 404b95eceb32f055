import Foundation

/// A parsed option value.
public indirect enum OptionValue: Sendable, Equatable {
    case bool(Bool)
    case int(Int)
    case number(Double)
    case string(String)
    case size(width: Int, height: Int)
    case rate(Rational)
    case duration(Double)
    case orientation(Orientation)
    case orientationSchedule([OrientationChange])
    case spans([TimeSpan])
    /// Secrets (stream keys), in the order given; `text` never shows them.
    case secrets([String])
    case color(RGB)
    /// -1 plays forever.
    case loop(Int)
    case perInput([String: OptionValue])
    /// Attempts in a row before giving up, and the first and longest delay between them (seconds).
    case retry(attempts: Int, first: Double, longest: Double)
    /// A value of a type a node declares itself (`OptionType.declared`).
    case declared(DeclaredValue)
}

public struct OrientationChange: Sendable, Equatable {
    public var at: Double
    public var value: Orientation
    public init(at: Double, value: Orientation) { self.at = at; self.value = value }
}

public struct TimeSpan: Sendable, Equatable {
    public var at: Double
    public var length: Double
    public init(at: Double, length: Double) { self.at = at; self.length = length }
    public func contains(_ t: Double) -> Bool { t >= at && t < at + length }

    /// The times inside some span of every list (each list's spans may overlap each other).
    public static func common(_ lists: [[TimeSpan]]) -> [TimeSpan] {
        guard var result = lists.first else { return [] }
        for other in lists.dropFirst() {
            result = result.flatMap { a in
                other.compactMap { b -> TimeSpan? in
                    let start = max(a.at, b.at), end = min(a.at + a.length, b.at + b.length)
                    return end > start ? TimeSpan(at: start, length: end - start) : nil
                }
            }
        }
        return result
    }
}

extension Array where Element == TimeSpan {
    public func covers(_ t: Double) -> Bool { contains { $0.contains(t) } }
}

/// Why a value did not parse; `at` points inside the value when a nested part is wrong.
public struct ValueProblem: Error, Sendable {
    public var message: String
    public var hint: String?
    public var at: SourceLocation?

    public init(message: String, hint: String? = nil, at: SourceLocation? = nil) {
        self.message = message
        self.hint = hint
        self.at = at
    }
}

extension OptionType {
    /// Parses a `.pipe` value. Messages name what was expected, in the file's words.
    public func parse(_ value: PipeValue) throws(ValueProblem) -> OptionValue {
        func scalar() throws(ValueProblem) -> String {
            guard let s = value.scalar else {
                throw ValueProblem(message: "expected \(name), got \(value.shown)", hint: example.map { "write it like \($0)" })
            }
            return s
        }
        func bad(_ s: String) -> ValueProblem {
            ValueProblem(message: "\(PipeValue.quoted(s)) is not a valid \(name)", hint: example.map { "write it like \($0)" })
        }
        func outOfRange(_ s: String) -> ValueProblem {
            ValueProblem(message: "\(name) \(PipeValue.quoted(s)) is out of range (\(rangeText ?? ""))", hint: nil)
        }
        /// A scalar read by `read` and kept inside `range`.
        func ranged<T: Comparable>(_ read: (String) -> T?, _ range: ClosedRange<T>) throws(ValueProblem) -> T {
            let s = try scalar()
            guard let v = read(s) else { throw bad(s) }
            guard range.contains(v) else { throw outOfRange(s) }
            return v
        }
        switch self {
        case .bool:
            let s = try scalar()
            switch s.lowercased() {
            case "true", "yes", "on": return .bool(true)
            case "false", "no", "off": return .bool(false)
            default: throw bad(s)
            }
        case .int(let r):
            return .int(try ranged({ Int($0) }, r))
        case .number(let r):
            return .number(try ranged({ Double($0).flatMap { $0.isFinite ? $0 : nil } }, r))
        case .string:
            return .string(try scalar())
        case .choice(let choices):
            let s = try scalar()
            guard choices.contains(s) else {
                throw ValueProblem(message: "\(PipeValue.quoted(s)) is not one of \(choices.joined(separator: ", "))",
                                   hint: Suggest.hint(for: s, in: choices))
            }
            return .string(s)
        case .size:
            let s = try scalar()
            guard let v = ValueSyntax.size(s) else { throw bad(s) }
            guard v.width <= 16384, v.height <= 16384 else { throw ValueProblem(message: "size \(PipeValue.quoted(s)) is out of range (1x1..16384x16384)") }
            return .size(width: v.width, height: v.height)
        case .rate(let r):
            let s = try scalar()
            guard let v = ValueSyntax.rate(s) else {
                // A number too large or too small to be a rate is out of range, not misspelt.
                if let x = Double(s.split(separator: "/").first ?? ""), x.isFinite, x > 0 { throw outOfRange(s) }
                throw bad(s)
            }
            guard r.contains(v.double) else { throw outOfRange(s) }
            return .rate(v)
        case .bitrate(let r):
            return .int(try ranged(ValueSyntax.bitrate, r))
        case .duration(let r):
            return .duration(try ranged(ValueSyntax.duration, r))
        case .gain:
            let s = try scalar()
            guard let v = ValueSyntax.gain(s) else { throw bad(s) }
            return .number(v)
        case .byteSize(let r):
            return .int(try ranged(ValueSyntax.byteSize, r))
        case .color:
            let s = try scalar()
            guard let v = ValueSyntax.color(s) else { throw bad(s) }
            return .color(v)
        case .path:
            let s = try scalar()
            guard !s.isEmpty else { throw bad(s) }
            return .string(s)
        case .orientation:
            let s = try scalar()
            guard let o = Orientation(rawValue: s) else {
                throw ValueProblem(message: "\(PipeValue.quoted(s)) is not an orientation", hint: Suggest.hint(for: s, in: Orientation.allCases.map(\.rawValue))
                    ?? "use one of \(Orientation.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            return .orientation(o)
        case .orientationSchedule:
            if value.scalar != nil {
                guard case .orientation(let o) = try OptionType.orientation.parse(value) else { fatalError() }
                return .orientationSchedule([OrientationChange(at: 0, value: o)])
            }
            var changes: [OrientationChange] = []
            for item in try Self.scheduleItems(value, keys: ["at", "value"], example: "[{at: 0s, value: up}, {at: 10s, value: left}]") {
                let at = try Self.field(item, "at", .duration(0...1e9))
                let v = try Self.field(item, "value", .orientation)
                guard case .duration(let t) = at, case .orientation(let o) = v else { continue }
                if let last = changes.last, t < last.at {
                    throw ValueProblem(message: "schedule times must not go back ('at' \(t)s after \(last.at)s)", at: item.location)
                }
                changes.append(OrientationChange(at: t, value: o))
            }
            return .orientationSchedule(changes)
        case .spans:
            var spans: [TimeSpan] = []
            for item in try Self.scheduleItems(value, keys: ["at", "for"], example: "[{at: 20s, for: 10s}]") {
                guard case .duration(let at) = try Self.field(item, "at", .duration(0...1e9)),
                      case .duration(let len) = try Self.field(item, "for", .duration(0...1e9)) else { continue }
                spans.append(TimeSpan(at: at, length: len))
            }
            return .spans(spans.sorted { $0.at < $1.at })
        case .secrets:
            // One key as a scalar (`--set src.keys=KEY`), or a list of them.
            if let s = value.scalar { return .secrets([s]) }
            guard let items = value.list else {
                throw ValueProblem(message: "expected a list of keys, got \(value.shown)", hint: "write it like [phone-key-1, phone-key-2]")
            }
            var keys: [String] = []
            for item in items {
                guard let s = item.scalar, !s.isEmpty else {
                    throw ValueProblem(message: "a key must be a non-empty string", at: item.location)
                }
                keys.append(s)
            }
            return .secrets(keys)
        case .loop:
            let s = try scalar()
            switch s.lowercased() {
            case "true", "yes": return .loop(-1)
            case "false", "no": return .loop(1)
            default:
                guard let n = Int(s), n >= 1 else {
                    throw ValueProblem(message: "\(PipeValue.quoted(s)) is not a valid loop value", hint: "write false, true or a play count like 3")
                }
                return .loop(n)
            }
        case .retry:
            return try Self.parseRetry(value)
        case .declared(let type):
            return .declared(DeclaredValue(try type.parse(value)))
        case .perInput(let inner):
            guard let entries = value.entries else {
                throw ValueProblem(message: "expected a mapping from input name to \(inner.name), got \(value.shown)",
                                   hint: "write it like {mic: 1.5}")
            }
            var out: [String: OptionValue] = [:]
            for e in entries {
                do { out[e.key] = try inner.parse(e.value) } catch {
                    var p = error
                    if p.at == nil { p.at = e.value.location }
                    throw p
                }
            }
            return .perInput(out)
        case .fields(let fields):
            guard let entries = value.entries else {
                throw ValueProblem(message: "expected a mapping \(name), got \(value.shown)", hint: "write it like \(name)")
            }
            var out: [String: OptionValue] = [:]
            for e in entries {
                guard let inner = fields[e.key] else {
                    throw ValueProblem(message: "unknown key '\(e.key)' (known: \(fields.keys.sorted().joined(separator: ", ")))", at: e.value.location)
                }
                do { out[e.key] = try inner.parse(e.value) } catch {
                    var p = error
                    if p.at == nil { p.at = e.value.location }
                    throw p
                }
            }
            return .perInput(out)
        }
    }

    /// `{attempts: 10, backoff: 1s..30s}`; either key may be left out (10 attempts, 1s..30s).
    /// `backoff: 2s` is a fixed delay. `attempts: 0` gives up at the first failure.
    private static func parseRetry(_ value: PipeValue) throws(ValueProblem) -> OptionValue {
        let example = "{attempts: 10, backoff: 1s..30s}"
        // Defaults are declared as text: the same mapping, written inline.
        if let text = value.scalar, text.hasPrefix("{"),
           case let (parsed?, problems) = PipeLoader.parse(data: Data(text.utf8), file: value.location.file), problems.isEmpty,
           parsed.entries != nil {
            return try parseRetry(parsed)
        }
        guard let entries = value.entries else {
            throw ValueProblem(message: "expected a mapping like \(example), got \(value.shown)", hint: "write it like \(example)")
        }
        var attempts = 10, first = 1.0, longest = 30.0
        for e in entries {
            switch e.key {
            case "attempts":
                guard case .int(let n) = try field(value, "attempts", .int(0...1000)) else { continue }
                attempts = n
            case "backoff":
                guard let s = e.value.scalar else {
                    throw ValueProblem(message: "expected a delay range like 1s..30s, got \(e.value.shown)", at: e.value.location)
                }
                let parts = s.components(separatedBy: "..")
                guard parts.count <= 2, let a = ValueSyntax.duration(parts[0]), let b = ValueSyntax.duration(parts.last!) else {
                    throw ValueProblem(message: "\(PipeValue.quoted(s)) is not a delay range", hint: "write it like 1s..30s or 500ms", at: e.value.location)
                }
                guard a <= b, b <= 3600 else {
                    throw ValueProblem(message: "backoff \(PipeValue.quoted(s)) must go from a shorter to a longer delay, at most 1h", at: e.value.location)
                }
                first = a
                longest = b
            default:
                throw ValueProblem(message: "unknown key \(PipeValue.quoted(e.key))", hint: Suggest.hint(for: e.key, in: ["attempts", "backoff"]) ?? "use attempts, backoff",
                                   at: e.keyLocation)
            }
        }
        return .retry(attempts: attempts, first: first, longest: longest)
    }

    private static func scheduleItems(_ value: PipeValue, keys: [String], example: String) throws(ValueProblem) -> [PipeValue] {
        guard let items = value.list else {
            throw ValueProblem(message: "expected a schedule, got \(value.shown)", hint: "write it like \(example)")
        }
        for item in items {
            guard let entries = item.entries else {
                throw ValueProblem(message: "a schedule entry must be a mapping, got \(item.shown)", hint: "write it like \(example)", at: item.location)
            }
            for e in entries where !keys.contains(e.key) {
                throw ValueProblem(message: "unknown schedule key \(PipeValue.quoted(e.key))", hint: Suggest.hint(for: e.key, in: keys) ?? "use \(keys.joined(separator: ", "))", at: e.keyLocation)
            }
        }
        return items
    }

    private static func field(_ item: PipeValue, _ key: String, _ type: OptionType) throws(ValueProblem) -> OptionValue {
        guard let v = item[key] else {
            throw ValueProblem(message: "schedule entry needs '\(key)'", at: item.location)
        }
        do { return try type.parse(v) } catch {
            var p = error
            if p.at == nil { p.at = v.location }
            throw p
        }
    }

    /// An example of the syntax, for hints.
    public var example: String? {
        switch self {
        case .bool: return "true or false"
        case .int(let r): return "\(r.lowerBound)"
        case .size: return "1280x720"
        case .rate: return "30, 29.97 or 30000/1001"
        case .bitrate: return "2500k, 2.5M or 128000"
        case .duration: return "60s, 1.5s, 500ms or 2m"
        case .gain: return "-6dB or 0.5"
        case .byteSize: return "50MB, 64MiB or 512kB"
        case .color: return "black or #202020"
        case .number: return "1.5"
        case .declared(let t): return t.example
        default: return nil
        }
    }
}

/// The resolved options of one node: every declared option with its value or default.
public struct OptionValues: Sendable {
    public var values: [String: OptionValue]
    /// Notes typed reads of settings the node type does not declare (set by `fillDefaults` and `Node.built`).
    public var audit: OptionAudit?
    public init(_ values: [String: OptionValue] = [:]) { self.values = values }

    public subscript(_ name: String) -> OptionValue? {
        get { values[name] }
        set { values[name] = newValue }
    }

    public func bool(_ n: String) -> Bool { if case .bool(let v)? = values[n] { return v }; return false }
    public func int(_ n: String) -> Int? { if case .int(let v)? = values[n] { return v }; return nil }
    public func number(_ n: String) -> Double? {
        switch values[n] {
        case .number(let v)?: return v
        case .int(let v)?: return Double(v)
        default: return nil
        }
    }
    public func string(_ n: String) -> String? { if case .string(let v)? = values[n] { return v }; return nil }
    public func size(_ n: String) -> (width: Int, height: Int)? { if case .size(let w, let h)? = values[n] { return (w, h) }; return nil }
    public func rate(_ n: String) -> Rational? { if case .rate(let v)? = values[n] { return v }; return nil }
    public func duration(_ n: String) -> Double? { if case .duration(let v)? = values[n] { return v }; return nil }
    public func color(_ n: String) -> RGB? { if case .color(let v)? = values[n] { return v }; return nil }
    public func spans(_ n: String) -> [TimeSpan] { if case .spans(let v)? = values[n] { return v }; return [] }
    public func orientationSchedule(_ n: String) -> [OrientationChange] {
        switch values[n] {
        case .orientationSchedule(let v)?: return v
        case .orientation(let o)?: return [OrientationChange(at: 0, value: o)]
        default: return []
        }
    }
    public func orientation(_ n: String) -> Orientation? { if case .orientation(let v)? = values[n] { return v }; return nil }
    public func loop(_ n: String) -> Int { if case .loop(let v)? = values[n] { return v }; return 1 }
    public func perInput(_ n: String) -> [String: OptionValue] { if case .perInput(let v)? = values[n] { return v }; return [:] }
    public func retry(_ n: String) -> (attempts: Int, first: Double, longest: Double)? {
        if case .retry(let a, let f, let l)? = values[n] { return (a, f, l) }; return nil
    }
}

extension OptionValue {
    /// The value as JSON-friendly text (events, `ctl get`).
    public var text: String {
        switch self {
        case .bool(let b): return String(b)
        case .int(let i): return String(i)
        case .number(let d): return String(d)
        case .string(let s): return s
        case .size(let w, let h): return "\(w)x\(h)"
        case .rate(let r): return r.description
        case .duration(let d): return "\(d)s"
        case .orientation(let o): return o.rawValue
        case .orientationSchedule(let c): return c.map { "\($0.at)s:\($0.value.rawValue)" }.joined(separator: ",")
        case .spans(let s): return s.map { "\($0.at)s+\($0.length)s" }.joined(separator: ",")
        case .secrets(let k): return "[\(k.count) \(k.count == 1 ? "key" : "keys"): \(Redaction.mask)]"
        case .color(let c): return String(format: "#%02x%02x%02x", c.r, c.g, c.b)
        case .loop(let n): return n < 0 ? "true" : String(n)
        case .perInput(let m): return m.keys.sorted().map { "\($0)=\(m[$0]!.text)" }.joined(separator: ",")
        case .retry(let a, let f, let l): return "{attempts: \(a), backoff: \(f)s..\(l)s}"
        case .declared(let d): return d.value.text
        }
    }
}
