import AVGraph
import CFFmpeg

/// Hides the picture behind a card while on. Three switches, any of which covers a picture:
/// the producer's own in-band switch carried on each picture (`Frame.privacy`: the app's
/// "active" trigger, exact to the picture whatever the queues), the live `enabled` option
/// (`ctl set`, optionally `--at` a media time), and a fixed `schedule`. Several cards may be
/// named (`cards:`); the in-band switch may pick one, else the live `card` option does.
final class PrivacyNode: Filter, Node {
    static let typeName = "privacy"
    static let summary = "replace the picture by a card while on (in-band switch from the producer, live switch, or schedule)"
    static let inputs = [PadSpec("video", [.rawVideo])]
    static let outputs = [PadSpec("video", [.rawVideo], doc: "the input, or the card while on; timing kept")]
    static let image = Setting.path("image", mustExist: true, doc: "the privacy card (PNG, JPEG...), fitted to the picture size; named 'image' among cards")
    static let cards = Setting.namedPaths("cards", doc: "several cards by name: {typing: typing.png, away: away.png}; a switch may name one")
    static let card = Setting<String?>.string("card", live: true,
        doc: "the card shown when a switch names none: a name from cards, or 'image' (default: image, else the first of cards by name)")
    static let enabled = Setting.bool("enabled", default: false, live: true, doc: "show the card now (avgraph ctl PIPELINE set NODE.enabled true [--at T])")
    static let schedule = Setting.spans("schedule", doc: "spans of media time [{at: 20s, for: 10s}] when the card shows by itself")
    static let options = [image.spec, cards.spec, card.spec, enabled.spec, schedule.spec]

    /// The schedule is fixed for the run, so producers may skip drawing what it covers; the live
    /// and in-band switches are not: a picture skipped for them could turn out to be shown.
    static func hiddenSpans(input: Int, options: OptionValues) -> [TimeSpan] { options[Self.schedule] }
    static var coversPictures: Bool { true }
    /// The card is fitted by the picture's size alone: the pictures it lets through go on unread.
    static func readsPixels(input: Int, options: OptionValues) -> Bool { false }
    /// A turned picture's card is drawn turned the same way, tag kept: it stands up where the picture would.
    static func orientationHandling(input: Int, options: OptionValues) -> OrientationHandling { .passesOn }
    /// A picture let through is handed on as it came; a card is drawn once per size and card.
    static func sharesProducerThread(options: OptionValues) -> Bool { true }

    static func negotiate(_ n: Negotiation) throws(NegotiationError) -> [StreamFormat] {
        guard let input = n.format(on: "video") else { throw NegotiationError("input 'video' is not connected") }
        guard let layout = PixelLayout(input.pixelFormat), sws_isSupportedOutput(layout.format) > 0 else {
            throw NegotiationError("cannot draw the card in \(input.pixelFormat) pictures")
        }
        let named = n[Self.cards]
        guard n[Self.image] != nil || !named.isEmpty else {
            throw NegotiationError("give the card: image: card.png, or cards: {name: card.png, ...}", option: "image")
        }
        for name in named.keys.sorted() where !PrivacyMark.isValidCardName(name) || name == "image" {
            throw NegotiationError("card name '\(name)' must be 1 to 64 of A-Z a-z 0-9 - _ (and not 'image')", option: "cards")
        }
        let paths = cardPaths(n.options, base: n.baseDirectory)
        for name in paths.keys.sorted() {
            do { _ = try ImageLoader.load(paths[name]!) } catch {
                throw NegotiationError("cannot read card '\(name)' (\(paths[name]!)): \(error)", option: name == "image" ? "image" : "cards")
            }
        }
        if let c = n[Self.card], paths[c] == nil {
            throw NegotiationError("no card named '\(c)'", option: "card", hint: "one of \(paths.keys.sorted().joined(separator: ", "))")
        }
        return [input]
    }

    static func cardPaths(_ options: OptionValues, base: String) -> [String: String] {
        var paths = options[Self.cards].mapValues { PathResolver.resolve($0, relativeTo: base) }
        if let i = options[Self.image] { paths["image"] = PathResolver.resolve(i, relativeTo: base) }
        return paths
    }

    let schedule: [TimeSpan]
    var enabled: Bool
    var current: String
    var cards: PrivacyCards
    /// Card names from in-band switches that name no card here (warned about once each).
    private var unknownCards: Set<String> = []

    init(_ setup: NodeSetup) throws {
        let paths = Self.cardPaths(setup.options, base: setup.baseDirectory)
        schedule = setup[Self.schedule]
        enabled = setup[Self.enabled]
        current = setup[Self.card] ?? (paths["image"] != nil ? "image" : paths.keys.sorted().first ?? "image")
        var geometry: PrivacyCards.Geometry?
        let f = setup.inputs.first?.format
        if let f, f.width > 0, f.height > 0, let format = PixelLayout.format(named: f.pixelFormat) {
            geometry = PrivacyCards.Geometry(width: f.width, height: f.height, format: format.rawValue)
        }
        cards = try PrivacyCards(paths: paths, geometry: geometry, sizeVaries: f?.sizeVaries ?? true)
    }

    override func set(option: String, to value: OptionValue) throws {
        if let on = try Self.enabled.value(in: option, value) {
            enabled = on
        } else if let name = try Self.card.value(in: option, value) {
            guard let name, cards.paths[name] != nil else {
                throw MediaError("no card named '\(name ?? "")' (cards: \(cards.paths.keys.sorted().joined(separator: ", ")))")
            }
            current = name
        } else {
            throw MediaError("option '\(option)' cannot be changed while running")
        }
    }

    override func receive(_ buffer: MediaBuffer, input: Int, _ out: Outlet) throws {
        guard let frame = buffer.frame else { return }
        let inBand = frame.privacy
        let t = frame.seconds
        guard inBand?.on == true || enabled || schedule.contains(where: { $0.contains(t) }) else {
            out.emit(frame)
            return
        }
        var name = current
        if inBand?.on == true, let wanted = inBand?.card {
            if cards.paths[wanted] != nil { name = wanted } else if unknownCards.insert(wanted).inserted {
                out.warning("the producer asked for privacy card '\(wanted)', which this node does not have; showing '\(current)'")
            }
        }
        let shown = try cards.card(name, for: frame).ref()
        shown.pts = frame.pts
        shown.timeBase = frame.timeBase
        shown.av.pointee.pkt_duration = frame.av.pointee.pkt_duration
        shown.orientation = frame.orientation
        shown.emittedAt = frame.emittedAt
        shown.covers = frame.source ?? frame.covers
        out.emit(shown)
    }
}
