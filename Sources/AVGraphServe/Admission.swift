/// Who may take a key now: serve's admission rules, apart from the sessions and processes they
/// are about (so they are tested as plain values).
public struct Admission<Session>: Sendable where Session: Sendable {
    /// What becomes of one arrival.
    public enum Plan: Sendable {
        case refuse(String)
        /// Its key's run still waits for a publisher: relay this one into it.
        case resume(Session)
        /// Ask `--auth` (or admit, without it) and start a new run.
        case ask
    }

    /// What admission knows of the session a key is relayed into.
    public struct Holder: Sendable {
        public var session: Session
        public var exited: Bool
        public var publishing: Bool
        public init(session: Session, exited: Bool, publishing: Bool) {
            self.session = session; self.exited = exited; self.publishing = publishing
        }
    }

    /// Keys (`app/key`) being asked about or started: a second publisher meanwhile is refused.
    public private(set) var asking: Set<String> = []

    public init() {}

    public static func mapKey(app: String, key: String) -> String { app + "/" + key }

    /// A key whose run still waits takes its publisher back; one whose publisher is live, or
    /// being asked about, takes no second. `.ask` marks the key as being asked about until `done`.
    public mutating func plan(_ mapKey: String, stopping: Bool, holder: Holder?) -> Plan {
        if stopping { return .refuse("serve is stopping") }
        if asking.contains(mapKey) { return .refuse("another publisher with this key is being admitted") }
        if let holder, !holder.exited {
            return holder.publishing ? .refuse("another publisher is live with this key") : .resume(holder.session)
        }
        asking.insert(mapKey)
        return .ask
    }

    /// A resume that found its run gone just now: this arrival starts a new one.
    public mutating func retake(_ mapKey: String) { asking.insert(mapKey) }

    /// The key's question is answered (admitted or not).
    public mutating func done(_ mapKey: String) { asking.remove(mapKey) }
}
