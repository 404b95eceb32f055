import Foundation
import XCTest

/// A network namespace of its own whose loopback is shaped by `tc`: what goes to `port` (the
/// publisher's uplink to its server), or what comes from it (a player's downlink), passes a token
/// bucket that narrows and widens on cue, the rest passes freely. Both ends live inside
/// the namespace on its loopback, no other address. Needs root, `ip` and `tc`; removed by
/// `remove()` (call it from a teardown block).
final class ShapedLink: @unchecked Sendable {
    let name: String
    static let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip"].first { FileManager.default.isExecutableFile(atPath: $0) }

    static var isAvailable: Bool { getuid() == 0 && ip != nil && FileManager.default.isExecutableFile(atPath: "/usr/sbin/tc") }

    /// Which packets of `port` pass the narrow link: those sent to it (a publisher's uplink to its
    /// server) or those sent from it (a server's answers: a player's downlink).
    enum Direction: String { case toPort = "dport", fromPort = "sport" }

    init(megabits: Double, port: Int, direction: Direction = .toPort) throws {
        name = "avg-shaped-\(getpid())-\(UInt16.random(in: 0...UInt16.max))"
        try Self.must(["netns", "add", name])
        do {
            // Packets the size of a real link's: loopback's own (64 kB, and as large again by GSO)
            // would not fit the narrow link's queue whole, and TCP would stall on their drops.
            try exec([Self.ip!, "link", "set", "lo", "mtu", "1500", "gso_max_size", "1500", "up"])
            let tc = "/usr/sbin/tc"
            // Two classes: packets to `port` through the narrow one, the rest through a wide one.
            try exec([tc, "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "20", "r2q", "1000"])
            try exec([tc, "class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb"] + Self.rate(megabits))
            try exec([tc, "class", "add", "dev", "lo", "parent", "1:", "classid", "1:20", "htb", "rate", "10gbit"])
            // The narrow link's queue: 60 kB (0.3 s at 1.5 Mbit/s), past it packets drop and TCP backs off.
            try exec([tc, "qdisc", "add", "dev", "lo", "parent", "1:10", "handle", "10:", "bfifo", "limit", "60000"])
            try exec([tc, "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "u32", "match", "ip", direction.rawValue, "\(port)", "0xffff", "flowid", "1:10"])
        } catch {
            remove()
            throw error
        }
    }

    /// A namespace with its loopback up and nothing shaped (a test adds its own rules).
    static func plain() throws -> ShapedLink { try ShapedLink() }

    private init() throws {
        name = "avg-plain-\(getpid())-\(UInt16.random(in: 0...UInt16.max))"
        try Self.must(["netns", "add", name])
        do { try exec([Self.ip!, "link", "set", "lo", "up"]) } catch {
            remove()
            throw error
        }
    }

    /// `megabits` Mbit/s with 20 ms of burst.
    static func rate(_ megabits: Double) -> [String] {
        let kbit = "\(Int(megabits * 1000))kbit"
        return ["rate", kbit, "ceil", kbit, "burst", "\(max(3000, Int(megabits * 1e6 / 8 * 0.02)))"]
    }

    func set(megabits: Double) throws {
        try exec(["/usr/sbin/tc", "class", "change", "dev", "lo", "parent", "1:", "classid", "1:10", "htb"] + Self.rate(megabits))
    }

    func remove() { _ = try? Self.run(["netns", "delete", name]) }

    /// `args` run inside the namespace, waited for; throws with what it said when it fails.
    @discardableResult
    func exec(_ args: [String]) throws -> String { try Self.must(["netns", "exec", name] + args) }

    /// A process inside the namespace, left running.
    func start(_ args: [String], output: FileHandle? = nil) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.ip!)
        p.arguments = ["netns", "exec", name] + args
        p.standardOutput = output ?? FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    /// Waits until something accepts TCP connections on the namespace's loopback `port`.
    func waitForListener(port: Int, timeout: Double = 10) throws {
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            if (try? exec(["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/\(port)"])) != nil { return }
            usleep(100_000)
        }
        throw NSError(domain: "ShapedLink", code: 1, userInfo: [NSLocalizedDescriptionKey: "nothing listens on port \(port) in \(name)"])
    }

    @discardableResult
    private static func must(_ args: [String]) throws -> String {
        let (status, output) = try run(args)
        guard status == 0 else {
            throw NSError(domain: "ShapedLink", code: Int(status), userInfo: [NSLocalizedDescriptionKey: "ip \(args.joined(separator: " ")): \(output)"])
        }
        return output
    }

    private static func run(_ args: [String]) throws -> (Int32, String) { try ServiceUnitTests.run([ip!] + args) }
}
