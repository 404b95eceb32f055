import AVGraphTesting
import Foundation
import XCTest

/// Past one machine: two `serve` nodes (127.0.0.2, 127.0.0.3) behind HAProxy in TCP mode with
/// health checks. Four phones spread over both; `kill -9` of one node: its phones (ffmpeg in a
/// retry loop) come back through HAProxy on the other node as new sessions, with `publish`
/// hooks, and are recorded whole there; nothing is left running.
final class ServeHAProxyTests: XCTestCase {
    static let haproxy = "/usr/sbin/haproxy"

    override func setUpWithError() throws {
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: Self.haproxy), "haproxy is not installed (scripts/setup installs it)")
    }

    func testKillingOneOfTwoNodesMovesItsPhonesToTheOther() throws {
        let dir = CLI.scratch("serve-haproxy")
        _ = ServeTests.clip
        let backend = try ServeBackend()
        defer { backend.stop() }
        let (runtime, environment) = try CLI.privateRuntime()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let port = try LoopbackPort.free(), front = try LoopbackPort.free()
        var nodes: [BackgroundRun] = []
        for (i, address) in ["127.0.0.2", "127.0.0.3"].enumerated() {
            let nodeDir = dir + "/node\(i)"
            try FileManager.default.createDirectory(atPath: nodeDir, withIntermediateDirectories: true)
            nodes.append(try ServeTests.startServe([ServeTests.template(nodeDir, idle: "2s"), "--listen", "rtmp://\(address):\(port)", "--open",
                                                    "--hooks", backend.url("/hooks"), "--hooks-secret", backend.dir + "/secret",
                                                    "--hooks-queue", nodeDir + "/rec/hooks"], dir: nodeDir, environment: environment, in: self))
        }
        CLI.write("""
            global
                maxconn 100
            defaults
                mode tcp
                timeout connect 2s
                timeout client 30s
                timeout server 30s
                retries 2
                option redispatch
            frontend rtmp
                bind 127.0.0.1:\(front)
                default_backend nodes
            backend nodes
                balance roundrobin
                server node0 127.0.0.2:\(port) check inter 300ms fall 1 rise 2
                server node1 127.0.0.3:\(port) check inter 300ms fall 1 rise 2

            """, to: dir + "/haproxy.cfg")
        let proxy = Process()
        proxy.executableURL = URL(fileURLWithPath: Self.haproxy)
        proxy.arguments = ["-f", dir + "/haproxy.cfg", "-db", "-q"]
        try proxy.run()
        defer { if proxy.isRunning { kill(proxy.processIdentifier, SIGKILL) }; proxy.waitUntilExit() }
        let up = Date().addingTimeInterval(10)
        while Date() < up && !LoopbackPort.accepts(front) { usleep(50_000) }
        XCTAssertTrue(proxy.isRunning, "haproxy runs (haproxy -c -f \(dir)/haproxy.cfg)")
        Thread.sleep(forTimeInterval: 1)  // both servers checked up

        // A phone app: publish; on a broken connection, publish again (at most 3 tries).
        let phones = try (1...4).map { n -> Process in
            _ = FileManager.default.createFile(atPath: dir + "/phone\(n).log", contents: nil)
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/bin/bash")
            p.arguments = ["-c", "for i in 1 2 3; do ffmpeg -nostdin -v error -re -i '\(ServeTests.clip)' -c copy -f flv rtmp://127.0.0.1:\(front)/live/phone\(n) && exit 0; sleep 0.3; done; exit 1"]
            p.standardInput = FileHandle.nullDevice
            p.standardError = FileHandle(forWritingAtPath: dir + "/phone\(n).log") ?? FileHandle.nullDevice
            try p.run()
            usleep(200_000)
            return p
        }
        defer { for p in phones where p.isRunning { p.terminate() } }
        Thread.sleep(forTimeInterval: 2.5)
        let before = nodes.map { ServeTests.runs(of: $0.process.processIdentifier).map(\.1) }
        XCTAssertEqual(before.map(\.count), [2, 2], "the four phones spread over both nodes: \(before)\n\(nodes[0].stderr)\n\(nodes[1].stderr)")
        let moved = Set(before[0].compactMap { args in (1...4).first { args.contains("key=phone\($0) ") || args.hasSuffix("key=phone\($0)") } })
        kill(nodes[0].process.processIdentifier, SIGKILL)
        for p in phones { p.waitUntilExit() }
        XCTAssertEqual(phones.map(\.terminationStatus), [0, 0, 0, 0], "every phone published its clip whole at last: "
                       + (1...4).map { (try? String(contentsOfFile: dir + "/phone\($0).log", encoding: .utf8)) ?? "" }.joined())
        // The second node's runs end 2 s after their publisher (idle); the killed node's orphans too (their input closed).
        let end = Date().addingTimeInterval(15)
        while Date() < end && !(ServeTests.runs(of: nodes[1].process.processIdentifier).isEmpty
                                && ServeTests.leftovers(nodes[0].stderr + nodes[1].stderr).isEmpty) { usleep(100_000) }
        kill(nodes[1].process.processIdentifier, SIGTERM)
        XCTAssertEqual(nodes[1].waitForExit(timeout: 20), 0, nodes[1].stderr)
        kill(proxy.processIdentifier, SIGTERM)
        proxy.waitUntilExit()
        XCTAssertEqual(ServeTests.leftovers(nodes[0].stderr + nodes[1].stderr), [], "no run left")

        let second = ServeTests.recordings(dir + "/node1")
        print("serve haproxy: moved \(moved.sorted()); node1 recorded \(second)")
        XCTAssertEqual(moved.count, 2)
        for n in 1...4 {
            let mine = second.filter { $0.hasPrefix("phone\(n)-") }
            XCTAssertEqual(mine.count, 1, "phone\(n) recorded once on the surviving node: \(second)")
            guard let name = mine.first else { continue }
            let m = try ServeTests.measure(dir + "/node1/rec/" + name)
            XCTAssertEqual(m.video, ServeTests.seconds, accuracy: 0.3, "phone\(n): seconds on node1")
        }
        let publishes = backend.hooks.compactMap { $0["body"] as? [String: Any] }.filter { $0["event"] as? String == "publish" }
        XCTAssertEqual(publishes.count, 6, "a publish hook for each of the 4 first sessions and the 2 new ones: \(publishes)")
        XCTAssertEqual(Set(publishes.compactMap { $0["session"] as? String }).count, 6, "the moved phones are new sessions")
        for n in moved {
            XCTAssertEqual(publishes.filter { $0["key"] as? String == "phone\(n)" }.count, 2, "phone\(n): published on both nodes")
        }
    }
}
