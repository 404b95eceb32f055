import Foundation

/// A node option declared once, as SwiftNIO declares a `ChannelOption`: its table row (name,
/// type, range, default, doc, live) and the Swift type the node reads it as.
///
///     static let rate = Setting.int("rate", 8000...384_000, default: 48000, doc: "sample rate in Hz")
///     static let options = [rate.spec, ...]          // what inspect, check, the harness and ctl see
///     let rate = setup.options[Self.rate]            // an Int: the given value or the default
///
/// The default is written once, in the declaration: `check` fills it in from `spec`, and a read
/// of an option that was not given returns the same value.
public struct Setting<Value: Sendable>: Sendable {
    public let spec: OptionSpec
    /// What a read returns when the option was not given: the default, or nil for an optional setting.
    public let initial: Value
    let decode: @Sendable (OptionValue) -> Value?

    /// `decode` maps the parsed value (of `type`) to the Swift value; the default, in the option's
    /// own syntax, is parsed once by the same parser `check` uses.
    init(_ name: String, _ type: OptionType, default text: String?, required: Bool = false, live: Bool, doc: String,
         optional: Value, decode: @escaping @Sendable (OptionValue) -> Value?) {
        spec = OptionSpec(name, type, default: text, required: required, live: live, doc: doc)
        self.decode = decode
        guard text != nil else { initial = optional; return }
        do {
            guard let parsed = try spec.parsedDefault(), let v = decode(parsed) else {
                preconditionFailure("default of '\(name)' does not read as \(Value.self)")
            }
            initial = v
        } catch {
            preconditionFailure("default of option '\(name)' does not parse as \(type.name): \(error.message)")
        }
    }

    /// This setting's value in a live change, or nil when the change is for another option;
    /// a value of the wrong type or out of the declared range throws.
    public func value(in change: String, _ value: OptionValue) throws(MediaError) -> Value? {
        guard change == spec.name else { return nil }
        guard spec.type.admits(value), let v = decode(value) else {
            throw MediaError("'\(value.text)' is not a valid \(spec.name) (\(spec.type.rangeText ?? spec.type.name))")
        }
        return v
    }
}

extension OptionType {
    /// Whether a parsed value lies within this type's declared range or choices (a live change
    /// made in Swift has not been through the `.pipe` parser that checks them).
    public func admits(_ value: OptionValue) -> Bool {
        switch (self, value) {
        case (.int(let r), .int(let v)), (.bitrate(let r), .int(let v)), (.byteSize(let r), .int(let v)): return r.contains(v)
        case (.number(let r), .number(let v)): return r.contains(v)
        case (.number(let r), .int(let v)): return r.contains(Double(v))
        case (.duration(let r), .duration(let v)): return r.contains(v)
        case (.rate(let r), .rate(let v)): return r.contains(v.double)
        case (.choice(let c), .string(let v)): return c.contains(v)
        default: return true
        }
    }
}

extension OptionSpec {
    /// The default parsed by the option's own parser (a default path is not looked for); nil without one.
    public func parsedDefault() throws(ValueProblem) -> OptionValue? {
        guard let defaultText else { return nil }
        var parseType = type
        if case .path = type { parseType = .path(mustExist: false) }
        let location = SourceLocation(file: "default of '\(name)'", line: 1, column: 1)
        // A node's own type may be a mapping (`{every: 10}`): its default is read as YAML, as a `.pipe` value is.
        if case .declared = type, case let (parsed?, problems) = PipeLoader.parse(data: Data(defaultText.utf8), file: location.file), problems.isEmpty {
            return try parseType.parse(parsed)
        }
        return try parseType.parse(.scalar(defaultText, location))
    }
}

extension OptionValues {
    /// Every declared option that was not given gets its default: what `check` and the harness hand
    /// a node. From here on, a typed read of a setting outside `specs` is noted (`OptionAudit`).
    public mutating func fillDefaults(from specs: [OptionSpec]) {
        for spec in specs where values[spec.name] == nil {
            values[spec.name] = try? spec.parsedDefault()
        }
        audit = OptionAudit(declared: specs)
    }

    /// The option's value as its own Swift type: what the file gave, else the declared default.
    public subscript<Value>(_ setting: Setting<Value>) -> Value {
        audit?.note(setting.spec.name)
        return values[setting.spec.name].flatMap(setting.decode) ?? setting.initial
    }
}

extension NodeSetup {
    /// A path setting resolved against the `.pipe` file's folder.
    public func path(_ setting: Setting<String?>) -> String? {
        options[setting].map { PathResolver.resolve($0, relativeTo: baseDirectory) }
    }
    public subscript<Value>(_ setting: Setting<Value>) -> Value { options[setting] }
}

extension Negotiation {
    public func path(_ setting: Setting<String?>) -> String? {
        options[setting].map { PathResolver.resolve($0, relativeTo: baseDirectory) }
    }
    public subscript<Value>(_ setting: Setting<Value>) -> Value { options[setting] }
}

/// A size option's value.
public struct PictureSize: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public init(width: Int, height: Int) { self.width = width; self.height = height }
}

/// A network sink's retry policy: attempts in a row, then the first and longest delay (seconds).
public struct RetryPolicy: Sendable, Equatable {
    public var attempts: Int
    public var first: Double
    public var longest: Double
}

// MARK: - One factory per option type, with and without a default.

extension Setting where Value == Bool {
    public static func bool(_ name: String, default value: Bool = false, live: Bool = false, doc: String) -> Self {
        Self(name, .bool, default: String(value), live: live, doc: doc, optional: value) { if case .bool(let v) = $0 { v } else { nil } }
    }
}

extension Setting where Value == Int {
    public static func int(_ name: String, _ range: ClosedRange<Int>, default value: Int, live: Bool = false, doc: String) -> Self {
        Self(name, .int(range), default: String(value), live: live, doc: doc, optional: value, decode: Self.int)
    }
    /// Bits per second (`2500k`), default in the same syntax.
    public static func bitrate(_ name: String, _ range: ClosedRange<Int>, default text: String, live: Bool = false, doc: String) -> Self {
        Self(name, .bitrate(range), default: text, live: live, doc: doc, optional: 0, decode: Self.int)
    }
    /// Bytes (`64MB`), default in the same syntax.
    public static func byteSize(_ name: String, _ range: ClosedRange<Int>, default text: String, live: Bool = false, doc: String) -> Self {
        Self(name, .byteSize(range), default: text, live: live, doc: doc, optional: 0, decode: Self.int)
    }
    /// `false`, `true` (forever: -1) or a count of plays.
    public static func loop(_ name: String, doc: String) -> Self {
        Self(name, .loop, default: "false", live: false, doc: doc, optional: 1) { if case .loop(let v) = $0 { v } else { nil } }
    }
    static func int(_ v: OptionValue) -> Int? { if case .int(let i) = v { i } else { nil } }
}

extension Setting where Value == Int? {
    public static func int(_ name: String, _ range: ClosedRange<Int>, live: Bool = false, doc: String) -> Self {
        Self(name, .int(range), default: nil, live: live, doc: doc, optional: nil) { if case .int(let i) = $0 { i } else { nil } }
    }
    public static func bitrate(_ name: String, _ range: ClosedRange<Int>, live: Bool = false, doc: String) -> Self {
        Self(name, .bitrate(range), default: nil, live: live, doc: doc, optional: nil) { if case .int(let i) = $0 { i } else { nil } }
    }
}

extension Setting where Value == Double {
    public static func number(_ name: String, _ range: ClosedRange<Double>, default value: Double, live: Bool = false, doc: String) -> Self {
        Self(name, .number(range), default: OptionType.num(value), live: live, doc: doc, optional: value, decode: Self.number)
    }
    /// Seconds, default in the duration syntax (`2s`, `100ms`).
    public static func duration(_ name: String, _ range: ClosedRange<Double>, default text: String, live: Bool = false, doc: String) -> Self {
        Self(name, .duration(range), default: text, live: live, doc: doc, optional: 0, decode: Self.seconds)
    }
    /// A linear factor, default in dB or linear (`-12dB`).
    public static func gain(_ name: String, default text: String, live: Bool = false, doc: String) -> Self {
        Self(name, .gain, default: text, live: live, doc: doc, optional: 1, decode: Self.number)
    }
    static func number(_ v: OptionValue) -> Double? {
        switch v {
        case .number(let d): d
        case .int(let i): Double(i)
        default: nil
        }
    }
    static func seconds(_ v: OptionValue) -> Double? { if case .duration(let d) = v { d } else { nil } }
}

extension Setting where Value == Double? {
    public static func duration(_ name: String, _ range: ClosedRange<Double>, live: Bool = false, doc: String) -> Self {
        Self(name, .duration(range), default: nil, live: live, doc: doc, optional: nil) { if case .duration(let d) = $0 { d } else { nil } }
    }
    public static func number(_ name: String, _ range: ClosedRange<Double>, live: Bool = false, doc: String) -> Self {
        Self(name, .number(range), default: nil, live: live, doc: doc, optional: nil, decode: Setting<Double>.number)
    }
}

extension Setting where Value == String {
    public static func string(_ name: String, default text: String, live: Bool = false, doc: String) -> Self {
        Self(name, .string, default: text, live: live, doc: doc, optional: text) { if case .string(let s) = $0 { s } else { nil } }
    }
    /// One of a list of names known at run time (FFmpeg's sample formats...); enums use `choice(_:default:)`.
    public static func choice(_ name: String, _ choices: [String], default text: String, live: Bool = false, doc: String) -> Self {
        Self(name, .choice(choices), default: text, live: live, doc: doc, optional: text) { if case .string(let s) = $0 { s } else { nil } }
    }
}

extension Setting where Value == String? {
    public static func string(_ name: String, required: Bool = false, live: Bool = false, doc: String) -> Self {
        Self(name, .string, default: nil, required: required, live: live, doc: doc, optional: nil) { if case .string(let s) = $0 { s } else { nil } }
    }
    public static func choice(_ name: String, _ choices: [String], live: Bool = false, doc: String) -> Self {
        Self(name, .choice(choices), default: nil, live: live, doc: doc, optional: nil) { if case .string(let s) = $0 { s } else { nil } }
    }
    /// A path relative to the `.pipe` file (read it with `setup.path(_:)`); `mustExist` makes `check` look for it.
    public static func path(_ name: String, mustExist: Bool, required: Bool = false, default text: String? = nil, doc: String) -> Self {
        Self(name, .path(mustExist: mustExist), default: text, required: required, live: false, doc: doc, optional: nil) {
            if case .string(let s) = $0 { s } else { nil }
        }
    }
}

extension Setting where Value: RawRepresentable & CaseIterable, Value.RawValue == String {
    /// One of a Swift enum's cases, by raw value.
    public static func choice(_ name: String, default value: Value, live: Bool = false, doc: String) -> Self {
        Self(name, .choice(Value.allCases.map(\.rawValue)), default: value.rawValue, live: live, doc: doc, optional: value) {
            if case .string(let s) = $0 { Value(rawValue: s) } else { nil }
        }
    }
}

extension Setting {
    /// One of a Swift enum's cases, with no default (nil when not given).
    public static func choice<Choice>(_ name: String, live: Bool = false, doc: String) -> Self
    where Value == Choice?, Choice: RawRepresentable & CaseIterable & Sendable, Choice.RawValue == String {
        Self(name, .choice(Choice.allCases.map(\.rawValue)), default: nil, live: live, doc: doc, optional: nil) {
            if case .string(let s) = $0 { Choice(rawValue: s) } else { nil }
        }
    }
}

extension Setting where Value == PictureSize {
    public static func size(_ name: String, default text: String, live: Bool = false, doc: String) -> Self {
        Self(name, .size, default: text, live: live, doc: doc, optional: PictureSize(width: 0, height: 0), decode: Self.size)
    }
    static func size(_ v: OptionValue) -> PictureSize? { if case .size(let w, let h) = v { PictureSize(width: w, height: h) } else { nil } }
}

extension Setting where Value == PictureSize? {
    public static func size(_ name: String, required: Bool = false, live: Bool = false, doc: String) -> Self {
        Self(name, .size, default: nil, required: required, live: live, doc: doc, optional: nil, decode: Setting<PictureSize>.size)
    }
}

extension Setting where Value == Rational {
    public static func rate(_ name: String, _ range: ClosedRange<Double>, default text: String, live: Bool = false, doc: String) -> Self {
        Self(name, .rate(range), default: text, live: live, doc: doc, optional: Rational(1, 1), decode: Self.rate)
    }
    static func rate(_ v: OptionValue) -> Rational? { if case .rate(let r) = v { r } else { nil } }
}

extension Setting where Value == Rational? {
    public static func rate(_ name: String, _ range: ClosedRange<Double>, required: Bool = false, live: Bool = false, doc: String) -> Self {
        Self(name, .rate(range), default: nil, required: required, live: live, doc: doc, optional: nil, decode: Setting<Rational>.rate)
    }
}

extension Setting where Value == RGB {
    public static func color(_ name: String, default text: String, live: Bool = false, doc: String) -> Self {
        Self(name, .color, default: text, live: live, doc: doc, optional: RGB(r: 0, g: 0, b: 0)) { if case .color(let c) = $0 { c } else { nil } }
    }
}

extension Setting where Value == Orientation? {
    public static func orientation(_ name: String, live: Bool = false, doc: String) -> Self {
        Self(name, .orientation, default: nil, live: live, doc: doc, optional: nil) { if case .orientation(let o) = $0 { o } else { nil } }
    }
}

extension Setting where Value == [OrientationChange] {
    /// A fixed orientation or a schedule; read as a schedule (a fixed value is one change at 0 s).
    public static func orientationSchedule(_ name: String, default text: String, live: Bool = false, doc: String) -> Self {
        Self(name, .orientationSchedule, default: text, live: live, doc: doc, optional: []) {
            switch $0 {
            case .orientationSchedule(let v): v
            case .orientation(let o): [OrientationChange(at: 0, value: o)]
            default: nil
            }
        }
    }
}

extension Setting where Value == [TimeSpan] {
    /// Spans of media time; none when not given.
    public static func spans(_ name: String, live: Bool = false, doc: String) -> Self {
        Self(name, .spans, default: nil, live: live, doc: doc, optional: []) { if case .spans(let s) = $0 { s } else { nil } }
    }
}

extension Setting where Value == [String] {
    /// Secrets (stream keys): a list, or one as a scalar; none when not given. Never shown.
    public static func secrets(_ name: String, doc: String) -> Self {
        Self(name, .secrets, default: nil, live: false, doc: doc, optional: []) { if case .secrets(let k) = $0 { k } else { nil } }
    }
}

extension Setting where Value == [String: Double] {
    /// A per-input gain map (`{mic: 1.5, app: -6dB}`), linear factors.
    public static func gains(_ name: String, live: Bool = false, doc: String) -> Self {
        Self(name, .perInput(.gain), default: nil, live: live, doc: doc, optional: [:]) { v in
            guard case .perInput(let m) = v else { return nil }
            return m.compactMapValues(Setting<Double>.number)
        }
    }
}

extension Setting where Value == [String: Bool] {
    /// A per-input switch map (`{mic: true}`).
    public static func switches(_ name: String, live: Bool = false, doc: String) -> Self {
        Self(name, .perInput(.bool), default: nil, live: live, doc: doc, optional: [:]) { v in
            guard case .perInput(let m) = v else { return nil }
            return m.compactMapValues { if case .bool(let b) = $0 { b } else { nil } }
        }
    }
}

extension Setting where Value == RetryPolicy {
    public static func retry(_ name: String, default text: String, live: Bool = false, doc: String) -> Self {
        Self(name, .retry, default: text, live: live, doc: doc, optional: RetryPolicy(attempts: 0, first: 0, longest: 0)) {
            if case .retry(let a, let f, let l) = $0 { RetryPolicy(attempts: a, first: f, longest: l) } else { nil }
        }
    }
}

extension Setting where Value == [String: String] {
    /// Named paths relative to the `.pipe` file (`{typing: typing.png, away: away.png}`); the node
    /// resolves them (`PathResolver`) and looks for the files when it negotiates.
    public static func namedPaths(_ name: String, doc: String) -> Self {
        Self(name, .perInput(.path(mustExist: true)), default: nil, live: false, doc: doc, optional: [:]) { v in
            guard case .perInput(let m) = v else { return nil }
            return m.compactMapValues { if case .string(let s) = $0 { s } else { nil } }
        }
    }
}

extension Setting where Value == [String: OptionValue]? {
    /// A mapping with fixed keys, each of its own type (`adaptive: {min: 800k}`); nil when not given.
    public static func fields(_ name: String, _ fields: [String: OptionType], doc: String) -> Self {
        Self(name, .fields(fields), default: nil, live: false, doc: doc, optional: nil) { if case .perInput(let m) = $0 { m } else { nil } }
    }
}
