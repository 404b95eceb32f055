import AVGraph
import Foundation

/// The node side of a network source: starts the reader, maps its sessions onto the run's
/// clock through the ingest emitter (the same reconnect behaviour as the `socket` source),
/// reports publishers and ends the run after `idle` without one.
final class NetworkSourceCore {
    /// What every network source emits besides the runtime's own events.
    static let events: [any NodeEvent.Type] = [ListeningEvent.self, PublisherEvent.self, IdleEvent.self, AwayEvent.self]
    let hub: IngestHub
    let emitter: IngestEmitter
    let reader: NetworkReader
    private let idle: Double?
    private let duration: Double?
    private var announced = false
    private var idleSince = 0.0
    /// A publisher sends media all the time (a still picture too): one that sent nothing for
    /// `silence` has stalled or died, and until it sends again the live edge of its media is its
    /// last media, not the clock. So `fps` and `mixer` stop there instead of padding until the
    /// listener's `timeout` verdict (padding a file cannot take back); media that comes after
    /// fills the gap. Longer than a publisher's steady cadence (a picture every 33 ms); what
    /// `fps` and `mixer` wait before padding is longer still (`fps` waits this on top of its own
    /// 100 ms, `ProducerPresence.silenceMark`; `mixer` its publisher's `audioLag`), so the mark is
    /// there before they would pad however this thread is scheduled.
    static let silence = 0.1
    /// How late a publisher's audio may come before a mixer fills it (`ProducerPresence.audioLag`).
    static let audioLag = 1.0
    /// A publisher's media lands up to about a frame ahead of the clock (`Source.mediaTimeSlack`).
    static let mediaTimeSlack = 0.05
    private var lastItem = Monotonic.now
    private var silent = false
    /// `away`: the pictures and silence that stand in for a publisher that is gone.
    private let away: AwayStandIn?

    init(_ setup: NodeSetup, input given: NetworkInput) {
        var input = given
        input.pixelsOnRequest = setup.pixelsOnRequest.first ?? false
        input.samplesOnRequest = setup.samplesOnRequest.count > 1 && setup.samplesOnRequest[1]
        // A decoded picture refused when the queue stays full breaks no reference chain: drop the newest.
        hub = IngestHub(videoCapacity: setup[NetworkSourceOptions.buffer], audioCapacity: setup[IngestOptions.audioBuffer], policy: .newest,
                        privacy: input.privacy)
        emitter = IngestEmitter(hub: hub, outputs: setup.outputs, audioLag: Self.audioLag, silenceMark: Self.silence)
        idle = setup[NetworkSourceOptions.idle]
        duration = setup.duration
        reader = NetworkReader(input, hub: hub, backlog: setup[NetworkSourceOptions.backlog])
        away = AwaySettings(setup.options, base: setup.baseDirectory).map { AwayStandIn($0, url: NetworkSourceOptions.redacted(input.url)) }
        reader.start()
    }

    func produce(_ out: Outlet) throws -> Bool {
        if !announced {
            announced = true
            idleSince = out.clock
            if reader.input.listen { out.event(ListeningEvent(path: reader.shownURL)) }
        }
        report(out)
        if let duration, out.clock >= duration { return false }
        // Without a publisher, the wait ends when `idle` runs out; the reader wakes it for anything sooner.
        let connected = reader.isConnected
        let idleEnds = connected ? nil : idle.map { Monotonic.now + max(0, idleSince + $0 - out.clock) }
        let silentAt = connected && !silent ? lastItem + Self.silence : nil
        let standInAt = away?.due(lastItem: lastItem, nextSlot: emitter.nextStandInSlot, clock: out.sourceClock)
        switch emitter.next(out, duration: duration, deadline: [idleEnds, silentAt, standInAt].compactMap { $0 }.min()) {
        case .item(let item):
            if away?.isStale(item) == true {
                out.countDropped(1, kind: item.pad == 0 ? .rawVideo : .rawAudio)
            } else {
                lastItem = Monotonic.now
                silent = false
                try emitter.emit(item, out)
                away?.saw(item)
                if emitter.isAnchored { away?.end(out) }
            }
            // A returning publisher's audio, waiting for its first picture, comes more often than
            // the stand-in's pictures are due: they go on in between.
            if let away, away.standing { try away.fill(emitter, lastItem: lastItem, out) }
        case .woken, .deadline:
            try emitter.idle(out)
            if let away, away.standing || away.isDue(lastItem: lastItem) {
                // The stand-in is the media now: no silence mark, no end of media for `fps` and `mixer` to stop at.
                try away.fill(emitter, lastItem: lastItem, out)
            } else if !reader.isConnected {
                try emitter.producerLeft(out)
            } else if !silent && Monotonic.now - lastItem >= Self.silence {
                silent = emitter.producerSilent()
                if !silent { lastItem = Monotonic.now }
            }
        case .ended: return false
        }
        if reader.isConnected { idleSince = out.clock }
        if let idle, out.clock - idleSince >= idle {
            out.event(IdleEvent(seconds: idle, url: reader.shownURL))
            return false
        }
        if let failure = reader.failure { throw failure }
        return !out.reachedEnd
    }

    private func report(_ out: Outlet) {
        for note in reader.takeNotes() {
            switch note {
            case .warning(let message): out.warning(message)
            case .event(let payload): out.event(payload)
            }
        }
    }

    /// Stopped (SIGTERM when the publisher left nginx, Ctrl-C): what was already decoded still
    /// goes into the recording.
    func finish(_ out: Outlet) throws {
        reader.stop()
        report(out)
        hub.finish()
        while let item = hub.queue.remaining() { try emitter.emit(item, out) }
        emitter.reportDrops(out)
    }

    func abort() {
        reader.stop()
        hub.finish()
    }
}
