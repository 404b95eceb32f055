/// A source whose media comes from outside at its own pace (an app pushing buffers, a producer
/// on a socket, a screen): it cannot be run faster than the world delivers it. A pipeline with
/// at least one live source runs in realtime unless its file says `realtime: false` (or the
/// command line says `--offline`): sources stamp media with the pipeline clock and nodes such
/// as `fps` and `mixer` act on that clock.
public protocol LiveSource: Source, Node {}

extension CheckedPipeline {
    /// Whether any node is a live source (then `realtime` defaults to true).
    public var hasLiveSource: Bool { nodes.contains { $0.type is any LiveSource.Type } }
}
