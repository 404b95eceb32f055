import AVGraph
import CFFmpeg
import Foundation

/// `away:` of the network sources: what viewers see while the publisher is gone. Without it a
/// gap leaves every output without media until the publisher returns (a live destination
/// buffers, then ends the broadcast; the HLS playlist stops growing).
struct AwaySettings {
    static let away = Setting<[String: OptionValue]?>.fields("away", ["after": .duration(0.1...3600), "image": .string],
        doc: "while the publisher is gone, the outputs go on in realtime: its last picture held and silence for 'after' (default 1s), then the card 'image' (a PNG, JPEG..., fitted to the stream's picture size; 'last' or left out: the last picture) and silence until it returns, its pictures from its next keyframe on; everything downstream gets them, recordings too. {after: 1s, image: away.png}")
    static let lastPicture = "last"
    static let defaultAfter = 1.0

    var after: Double
    /// The card's image file, resolved; nil: the last picture.
    var image: String?

    /// The source's `away`, nil when not given.
    init?(_ options: OptionValues, base: String) {
        guard let given = options[Self.away] else { return nil }
        after = given["after"].flatMap { if case .duration(let d) = $0 { d } else { nil } } ?? Self.defaultAfter
        let name = given["image"].flatMap { if case .string(let s) = $0 { s } else { nil } }
        image = name.flatMap { $0 == Self.lastPicture ? nil : PathResolver.resolve($0, relativeTo: base) }
    }

    /// A card that does not read is refused by `check`, at the option.
    static func negotiate(_ n: Negotiation) throws(NegotiationError) {
        guard let settings = AwaySettings(n.options, base: n.baseDirectory), let image = settings.image else { return }
        do { _ = try ImageLoader.load(image) } catch {
            throw NegotiationError("cannot read the away card '\(image)': \(error)", option: away.spec.name,
                                   hint: "give an image file (PNG, JPEG...) or image: last")
        }
    }
}

/// One network source's stand-in while its publisher is away: the last picture held, then the
/// card, each shown by reference (drawn once per picture geometry), and the `away` events of
/// the span. The pictures carry no source packet: an encoder with `passthrough: auto` encodes
/// them as changed pictures and splices back into the publisher's packets at its next keyframe.
final class AwayStandIn {
    let settings: AwaySettings
    private let url: String
    private var image: Frame?
    private var imageProblem: String?
    /// The publisher's last picture; its pixels are read only when a stand-in shows it.
    private var last: Frame?
    private var held: Frame?
    private var fitted: (geometry: PrivacyCards.Geometry, card: Frame)?
    /// Source-clock time from which the card shows (before it: the last picture, held).
    private var cardFrom: Double?
    /// Media time (the emitted timeline) of the span's first card and where its last one ends.
    private var span: (from: Double, to: Double)?
    /// The session and producer time of the newest media that reached the outputs, and of the
    /// newest before the stand-in began.
    private var newest: (session: Int, time: Double)?
    private var edge: (session: Int, time: Double)?
    /// Media of the session that went quiet, timed this close after its last media before the
    /// stand-in, is what its connection held back (the decoder's last pictures, out only when a
    /// publisher that stalled is taken as gone, `timeout` later): it belongs where the stand-in
    /// began, so it is dropped rather than taken as the publisher's return. A publisher that
    /// resumes after a stall goes on with later times.
    static let heldBack = 0.5

    init(_ settings: AwaySettings, url: String) {
        self.settings = settings
        self.url = url
        // Read once, before any publisher: showing the card costs nothing when it is needed.
        if let path = settings.image {
            do { image = try ImageLoader.load(path) } catch { imageProblem = "cannot read the away card '\(path)': \(error); the last picture shows instead" }
        }
    }

    var standing: Bool { cardFrom != nil }

    /// Media of the publisher that reached the outputs.
    func saw(_ item: IngestQueue.Item) {
        if let t = item.sourceTime {
            // Audio and video of a session run a little apart: the newest of either.
            let before = newest.flatMap { $0.session == item.session ? $0.time : nil } ?? t
            newest = (item.session, max(t, before))
        }
        guard item.pad == 0 else { return }
        last = item.frame
        held = nil
    }

    /// Whether `item` is held-back media of the session that went quiet (`heldBack`), to drop.
    func isStale(_ item: IngestQueue.Item) -> Bool {
        guard standing, let edge, item.session == edge.session, let t = item.sourceTime else { return false }
        return t < edge.time + Self.heldBack
    }

    /// Monotonic time the stand-in has to act next: its next picture while it stands, else
    /// `after` past the publisher's last media; nil before any picture (no size to show at).
    func due(lastItem: Double, nextSlot: Double, clock: Double) -> Double? {
        guard last != nil else { return nil }
        return standing ? Monotonic.now + max(0, nextSlot - clock) : lastItem + settings.after
    }

    /// Whether the publisher has been gone long enough for the stand-in (it has shown a picture).
    func isDue(lastItem: Double) -> Bool { last != nil && Monotonic.now - lastItem >= settings.after }

    /// Puts out the stand-in's next picture (and silence) when its time has come, starting the
    /// span once the publisher has been gone for `after`.
    func fill(_ emitter: IngestEmitter, lastItem: Double, _ out: Outlet) throws {
        if !standing {
            guard isDue(lastItem: lastItem) else { return }
            cardFrom = out.sourceClock
            edge = newest
            emitter.standInBegins()
            if let imageProblem {
                out.warning(imageProblem)
                self.imageProblem = nil
            }
        }
        // One picture a call: nodes that share the source's thread run between its calls, and the
        // publisher's return is seen between two pictures.
        let t = emitter.nextStandInSlot
        guard let from = cardFrom, t <= out.sourceClock, !out.reachedEnd else { return }
        let onCard = t >= from - 1e-6
        let picture = try (onCard ? card() : heldPicture()).ref()
        try emitter.emitStandIn(picture, at: t, out)
        guard onCard else { return }
        let end = picture.seconds + emitter.standInPeriod
        if let s = span {
            span = (s.from, end)
        } else {
            span = (picture.seconds, end)
            out.event(AwayEvent(state: .started, from: Self.ms(picture.seconds), url: url))
        }
    }

    /// The publisher's media is back (anchored again): the span ends where its last card did.
    func end(_ out: Outlet) {
        guard standing else { return }
        cardFrom = nil
        if let s = span { out.event(AwayEvent(state: .ended, from: Self.ms(s.from), to: Self.ms(s.to), url: url)) }
        span = nil
    }

    private static func ms(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }

    /// The last picture's pixels as a picture of ours (no source packet: an encoder that splices
    /// encodes it), under the same privacy mark, so a privacy node covers it as it covered the picture.
    private func heldPicture() throws -> Frame {
        if let held { return held }
        guard let last else { throw MediaError("no picture to hold") }
        var pixels = last
        if last.awaitsPixels, let source = last.source, let decoding = source.decoding {
            pixels = try source.decodedPicture ?? decoding.decode(source)
        }
        let picture = pixels.ref()
        picture.source = nil
        picture.covers = last.source
        picture.orientation = last.orientation
        picture.privacy = last.privacy
        held = picture
        return picture
    }

    /// The card at the last picture's geometry (fitted again when the publisher's size changed).
    private func card() throws -> Frame {
        guard let image, let last else { return try heldPicture() }
        let geometry = PrivacyCards.Geometry(width: last.width, height: last.height, format: last.av.pointee.format,
                                             orientation: last.orientation)
        if let fitted, fitted.geometry == geometry { return fitted.card }
        let card = try PrivacyCards.fit(image, to: geometry)
        card.orientation = last.orientation
        card.covers = last.source
        fitted = (geometry, card)
        return card
    }
}
