import AVGraphTesting
import Foundation
import XCTest

/// `run --http`: the operator's page, opened in Debian's chromium (headless, driven by Selenium
/// through chromium-driver), checked for what a person sees, and the recording checked after.
final class OperatorPageTests: XCTestCase {
    /// The start of a browser script: headless chromium (Selenium through chromium-driver) as `d`,
    /// certificate errors ignored (a test's certificate is its own), `until(f, seconds)` to poll.
    static let chromium = #"""
import json, sys, time
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
o = webdriver.ChromeOptions()
for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000", "--ignore-certificate-errors"]:
    o.add_argument(a)
o.binary_location = "/usr/bin/chromium"
# What the page's console says (errors such as a failed request are "SEVERE").
o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
def until(f, timeout):
    end = time.time() + timeout
    while time.time() < end:
        v = f()
        if v: return v
        time.sleep(0.05)
    return f()

"""#

    /// `chromium` and `pixel(fx, fy)`: the colour at a fraction of the preview picture the page shows;
    /// `card()`: whether it shows pipelines/live.pipe's privacy card (navy corner, light lock).
    static let preview = chromium + #"""
SAMPLE = """const img = document.getElementById('preview'); if (!img.complete || !img.naturalWidth) return null;
  const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext('2d'); g.drawImage(img, 0, 0);"""
def pixel(fx, fy):
    return d.execute_script(SAMPLE + """const p = g.getImageData(Math.floor(arguments[0] * c.width), Math.floor(arguments[1] * c.height), 1, 1).data;
      return [p[0], p[1], p[2]];""", fx, fy)
def card():
    corner, lock = pixel(0.02, 0.04), pixel(0.46, 0.38)
    return corner and lock and abs(corner[0] - 29) < 16 and abs(corner[2] - 59) < 16 and min(lock) > 180

"""#

    /// What a person does on the page, in a real browser: watches the preview move, reads the
    /// meters, mutes both sounds, switches the privacy card on, pauses and resumes; the results
    /// as JSON. Colours are read from the preview image the page shows.
    static let browser = preview + #"""
url, shot = sys.argv[1], sys.argv[2]
out = {}
def fingerprint():
    return d.execute_script(SAMPLE + """const p = g.getImageData(0, 0, c.width, c.height).data; let s = [];
      for (let i = 0; i < 64; i++) s.push(p[Math.floor(p.length / 64 * i / 4) * 4]); return s.join(',');""")
def db(node):
    v = d.execute_script("const m = document.getElementById('meter-' + arguments[0]); return m ? m.dataset.db : null;", node)
    return float(v) if v is not None else None
try:
    d.get(url)
    out["state"] = until(lambda: d.find_element(By.ID, "state").text if d.find_element(By.ID, "state").text in ("running", "paused") else None, 10)
    first = until(fingerprint, 5)
    t0 = time.time()
    changed = until(lambda: (f := fingerprint()) is not None and f != first, 4)
    out["preview_changed_after"] = time.time() - t0 if changed else None
    until(lambda: (db("mic") or -200) > -30, 10)
    out["app_db"], out["mic_db"], out["program_db"] = db("app"), db("mic"), db("program")
    # In one script: the graph is drawn again every 3 s, which leaves elements found earlier stale.
    out["graph_nodes"] = d.execute_script("return [...document.querySelectorAll('#graph g.node')].map((e) => e.dataset.node)")
    out["edge_rates"] = until(lambda: d.execute_script("return [...document.querySelectorAll('#graph .edge-label')].filter(e => e.textContent.includes('/s')).length"), 5)
    d.save_screenshot(shot)
    d.find_element(By.ID, "set-mix-mute-app").click(); d.find_element(By.ID, "set-mix-mute-mic").click()
    until(lambda: (db("program") or 0) < -60, 3)
    out["program_muted_db"] = db("program")
    d.find_element(By.ID, "set-mix-mute-app").click(); d.find_element(By.ID, "set-mix-mute-mic").click()
    until(lambda: (db("program") or -200) > -30, 3)
    out["program_unmuted_db"] = db("program")
    out["before_privacy"] = [pixel(0.02, 0.04), pixel(0.46, 0.38)]
    t0 = time.time()
    d.find_element(By.ID, "set-privacy-enabled").click()
    out["card_after"] = time.time() - t0 if until(card, 3) else None
    out["with_privacy"] = [pixel(0.02, 0.04), pixel(0.46, 0.38)]
    d.find_element(By.ID, "pause").click()
    out["paused_state"] = until(lambda: d.find_element(By.ID, "state").text == "paused", 3)
    time.sleep(2)
    d.find_element(By.ID, "pause").click()
    out["resumed_state"] = until(lambda: d.find_element(By.ID, "state").text == "running", 3)
    out["warnings"] = d.find_element(By.ID, "warnings").text
    out["console"] = [e["message"] for e in d.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
finally:
    d.quit()
print(json.dumps(out))
"""#

    /// pipelines/live.pipe running for `duration` with its page on a free loopback port and its
    /// control socket in `dir`, recording to `recording`; returned once it has started.
    func startLivePage(_ dir: String, duration: String, recording: String) throws -> (run: BackgroundRun, port: Int) {
        let port = try LoopbackPort.free()
        let run = try BackgroundRun(["run", CLI.packageRoot + "/pipelines/live.pipe", "--http", "127.0.0.1:\(port)", "--duration", duration,
                                     "--events", "json", "--control", dir + "/ctl.sock", "--set", "out.path=\(recording)"])
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "start" }, run.stderr)
        return (run, port)
    }

    func testPageInChromiumShowsAndSteersTheLivePipeAndTheRecordingAgrees() throws {
        let dir = CLI.scratch()
        let recording = dir + "/live.mp4"
        let (run, port) = try startLivePage(dir, duration: "16s", recording: recording)
        XCTAssertTrue(run.stderr.contains("operator page: http://127.0.0.1:\(port)/"), run.stderr)
        // AVGRAPH_SCREENSHOTS=1 writes the README's picture; otherwise it stays in the scratch folder.
        let shot = ProcessInfo.processInfo.environment["AVGRAPH_SCREENSHOTS"] == "1" ? CLI.packageRoot + "/docs/operator-page.png" : dir + "/operator-page.png"
        let seen = try XCTUnwrap(PythonWitness.run(Self.browser, ["http://127.0.0.1:\(port)/", shot]) as? [String: Any])
        print("operator page in chromium: \(seen)")
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)

        XCTAssertLessThanOrEqual(try XCTUnwrap(seen["preview_changed_after"] as? Double, "the preview never changed"), 2)
        // Both tones are -12 dBFS at their peak; the meters sit before the mixer's gain.
        XCTAssertEqual(try XCTUnwrap(seen["app_db"] as? Double), -12, accuracy: 1)
        XCTAssertEqual(try XCTUnwrap(seen["mic_db"] as? Double), -12, accuracy: 1)
        XCTAssertLessThan(try XCTUnwrap(seen["program_muted_db"] as? Double), -60, "muting both inputs silences the program")
        XCTAssertGreaterThan(try XCTUnwrap(seen["program_unmuted_db"] as? Double), -30)
        XCTAssertLessThanOrEqual(try XCTUnwrap(seen["card_after"] as? Double, "the card never showed: \(seen)"), 2)
        XCTAssertEqual(seen["paused_state"] as? Bool, true)
        XCTAssertEqual(seen["resumed_state"] as? Bool, true)
        let nodes = ["screen", "appsound", "micsound", "app", "mic", "upright", "fit", "privacy", "smooth", "mix", "program", "video", "audio", "out"]
        XCTAssertEqual(Set(seen["graph_nodes"] as? [String] ?? []), Set(nodes), "the graph shows every node")
        XCTAssertTrue(FileManager.default.fileExists(atPath: shot))
        XCTAssertEqual(seen["console"] as? [String], [], "Chromium's console says nothing of the page (the icon, every request answered)")

        // The recording: the card from the change on, the screen before it; the pause cut out.
        let applied = try XCTUnwrap(run.events.first { $0["event"] as? String == "applied" && $0["node"] as? String == "privacy" })
        let on = try XCTUnwrap(applied["media_time"] as? Double)
        let pausedFor = try XCTUnwrap(run.events.first { $0["event"] as? String == "resumed" }?["paused_for"] as? Double)
        let times = try CLI.videoFrameTimes(recording)
        let frames = try HlsWitness.grayPictures(recording, width: 64, height: 36)
        XCTAssertEqual(times.count, frames.count)
        // Navy corner (luma ~40) and a light lock: the card. The screen has black bars at the corner.
        let isCard = { (f: [UInt8]) in abs(Int(f[1 * 64 + 1]) - 40) < 14 && f[14 * 64 + 29] > 180 }
        let after = zip(times, frames).filter { $0.0 >= on + 0.001 }
        let before = zip(times, frames).filter { $0.0 < on - 0.001 }
        XCTAssertGreaterThan(after.count, 30)
        XCTAssertTrue(after.allSatisfy { isCard($0.1) }, "every picture from \(on) s shows the card")
        XCTAssertTrue(before.allSatisfy { !isCard($0.1) }, "no picture before \(on) s shows the card")
        XCTAssertEqual(pausedFor, 2, accuracy: 1)
        XCTAssertEqual((times.last ?? 0) + 1.0 / 30, 16 - pausedFor, accuracy: 0.3, "the pause is cut out")
        // A realtime run on a busy machine may drop pictures (and says so); the pause adds no hole.
        let stats = run.events.last { $0["event"] as? String == "stats" }
        let dropped = (stats?["dropped_by_kind"] as? [String: Any])?["video"] as? Int ?? 0
        XCTAssertLessThan(zip(times, times.dropFirst()).map { $1 - $0 }.max() ?? 1, Double(dropped + 1) / 30 + 0.01,
                          "no hole where the pause was (\(dropped) pictures dropped)")
    }

    /// The graph as a person reads it, measured in chromium from what the page drew (each box's,
    /// label's and edge's own geometry, getBBox and the polylines' points): sources on top, every
    /// edge going down, no box over a box, no label over a label, a box or a line, each label beside
    /// its own edge, no edge through a box, and no two edges crossing. live.pipe's picture chain and
    /// its sound tree meet only at `out`, so a layering without a crossing exists: 0 is the least
    /// and what the page must draw (the drawing before the layered one crossed 4 times). Measured
    /// twice, a redraw apart, as the rates and drop counts in the labels change their widths.
    func testTheGraphIsLayeredWithoutCrossingsOrCoveredLabels() throws {
        let dir = CLI.scratch()
        let (run, port) = try startLivePage(dir, duration: "12s", recording: dir + "/layered.mp4")
        let seen = try XCTUnwrap(PythonWitness.run(Self.chromium + #"""
        GEOMETRY = r"""
        const svg = document.getElementById('graph');
        const box = (e) => { const b = e.getBBox(); return { x: b.x, y: b.y, w: b.width, h: b.height }; };
        const meet = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
        const nodes = [...svg.querySelectorAll('g.node')].map((g) => ({ name: g.dataset.node, ...box(g.querySelector('rect')), text: box(g.querySelector('text')) }));
        const labels = [...svg.querySelectorAll('.edge-label')].map((t) => ({ name: t.textContent, edge: t.dataset.edge, ...box(t) }));
        const edges = [...svg.querySelectorAll('polyline.edge')].map((l) => ({ from: l.dataset.from, to: l.dataset.to, edge: l.dataset.edge, points: [...l.points].map((p) => [p.x, p.y]) }));
        const pairs = (list, f) => list.flatMap((a, i) => list.slice(i + 1).filter((b) => f(a, b)).map((b) => [a.name, b.name]));
        const segments = (e) => e.points.slice(1).map((q, i) => [e.points[i], q]);
        const side = (a, b, c) => Math.sign((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]));
        const cross = ([p, q], [r, s]) => side(p, q, r) * side(p, q, s) < 0 && side(r, s, p) * side(r, s, q) < 0;
        const along = ([p, q], f) => { for (let t = 0; t <= 1; t += 0.02) if (f(p[0] + (q[0] - p[0]) * t, p[1] + (q[1] - p[1]) * t)) return true; return false; };
        const at = Object.fromEntries(nodes.map((n) => [n.name, n]));
        const fed = new Set(edges.map((e) => e.to)), top = Math.min(...nodes.map((n) => n.y));
        const name = (e) => e.from + '>' + e.to;
        return {
          nodes: nodes.map((n) => n.name), edges: edges.map(name), labels: labels.map((l) => l.name),
          crossings: edges.flatMap((a, i) => edges.slice(i + 1).flatMap((b) => segments(a).flatMap((s) => segments(b).filter((r) => cross(s, r)).map(() => name(a) + ' x ' + name(b))))),
          box_overlaps: pairs(nodes, meet),
          label_on_edge: labels.flatMap((l) => edges.filter((e) => segments(e).some((s) => along(s, (x, y) => x > l.x && x < l.x + l.w && y > l.y && y < l.y + l.h))).map((e) => l.name + ' on ' + name(e))),
          label_overlaps: pairs(labels, meet),
          label_on_box: labels.flatMap((l) => nodes.filter((n) => meet(l, n)).map((n) => [l.name, n.name])),
          text_outside_box: nodes.filter((n) => n.text.x < n.x || n.text.x + n.text.w > n.x + n.w || n.text.y < n.y || n.text.y + n.text.h > n.y + n.h).map((n) => n.name),
          label_away_from_edge: labels.filter((l) => !edges.some((e) => e.edge === l.edge && segments(e).some((s) => along(s, (x, y) =>
             Math.hypot(Math.max(l.x - x, 0, x - l.x - l.w), Math.max(l.y - y, 0, y - l.y - l.h)) <= 6)))).map((l) => l.name),
          edge_through_box: edges.flatMap((e) => nodes.filter((n) => n.name !== e.from && n.name !== e.to && segments(e).some((s) => along(s, (x, y) =>
             x > n.x && x < n.x + n.w && y > n.y && y < n.y + n.h))).map((n) => name(e) + ' through ' + n.name)),
          sources_not_on_top: nodes.filter((n) => !fed.has(n.name) && n.y !== top).map((n) => n.name),
          edges_not_down: edges.filter((e) => !at[e.from] || !at[e.to] || at[e.from].y + at[e.from].h > at[e.to].y || e.points.some((p, i) => i && p[1] < e.points[i - 1][1])).map(name),
        };
        """
        url, shot = sys.argv[1], sys.argv[2]
        out = {}
        try:
            d.get(url)
            out["state"] = until(lambda: d.find_element(By.ID, "state").text in ("running", "paused"), 10)
            out["rates"] = until(lambda: (n := d.execute_script("return [...document.querySelectorAll('#graph .edge-label')].filter((e) => e.textContent.includes('/s')).length")) >= 13 and n, 10)
            out["first"] = d.execute_script(GEOMETRY)
            time.sleep(3.5)
            out["second"] = d.execute_script(GEOMETRY)
            d.save_screenshot(shot)
            out["console"] = [e["message"] for e in d.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        finally:
            d.quit()
        print(json.dumps(out))
        """#, ["http://127.0.0.1:\(port)/", dir + "/layered.png"]) as? [String: Any])
        print("the graph in chromium: \(seen)")
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
        XCTAssertEqual(seen["rates"] as? Int, 13, "every edge's label shows its rate: \(seen)")
        XCTAssertEqual(seen["console"] as? [String], [])
        let nodes = ["screen", "appsound", "micsound", "app", "mic", "upright", "fit", "privacy", "smooth", "mix", "program", "video", "audio", "out"]
        for moment in ["first", "second"] {
            let g = try XCTUnwrap(seen[moment] as? [String: Any], moment)
            XCTAssertEqual(Set(g["nodes"] as? [String] ?? []), Set(nodes), moment)
            XCTAssertEqual((g["edges"] as? [String])?.count, 13, "\(moment): \(g)")
            XCTAssertEqual((g["labels"] as? [String])?.count, 13, "\(moment): \(g)")
            for problem in ["crossings", "box_overlaps", "label_overlaps", "label_on_box", "label_on_edge", "text_outside_box", "label_away_from_edge",
                            "edge_through_box", "sources_not_on_top", "edges_not_down"] {
                XCTAssertEqual((g[problem] as? [Any])?.count, 0, "\(moment): \(problem): \(g[problem] ?? "missing")")
            }
        }
    }

    /// The page names no node: with the privacy node called `card`, the mixer `blend` and a
    /// `clips` node, it still has the privacy switch (and the card shows in the preview), a mute
    /// per mixer input, a clip button whose file ffprobe reads, and a field for the encoder's
    /// bitrate whose change the run applies; all learned from `/api/graph`.
    func testThePageLearnsItsControlsFromTheGraph() throws {
        let dir = CLI.scratch()
        let port = try LoopbackPort.free()
        try """
        pipeline: renamed
        duration: 14s
        nodes:
          screen:   {type: testsrc, size: 640x360, rate: 30}
          appsound: {type: tone, freq: 440}
          micsound: {type: tone, freq: 880}
          card:     {type: privacy, in: screen, image: \(CLI.packageRoot)/assets/privacy.png}
          blend:    {type: mixer, in: [appsound, micsound]}
          video:    {type: h264, in: card, bitrate: 1000k, gop: 30}
          audio:    {type: aac, in: blend}
          keep:     {type: clips, in: [video, audio], window: 5s}
          out:      {type: file, in: [video, audio], path: renamed.mp4}
        """.write(toFile: dir + "/renamed.pipe", atomically: true, encoding: .utf8)
        let run = try BackgroundRun(["run", dir + "/renamed.pipe", "--http", "127.0.0.1:\(port)", "--events", "json",
                                     "--control", dir + "/ctl.sock"], cwd: dir)
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "start" }, run.stderr)
        let graph = try CLI.shell(["curl", "-s", "--max-time", "5", "http://127.0.0.1:\(port)/api/graph"])
        XCTAssertTrue(graph.contains(#""commands":[{"doc":"#) && graph.contains(#""fixed":{"action":"save"},"name":"clip","needs":[]"#),
                      "the page's graph: clip needs nothing the page fills: \(graph)")
        let seen = try XCTUnwrap(PythonWitness.run(Self.preview + #"""
        url = sys.argv[1]
        out = {}
        try:
            d.get(url)
            out["state"] = until(lambda: d.find_element(By.ID, "state").text in ("running", "paused"), 10)
            out["buttons"] = until(lambda: [b.get_attribute("id") for b in d.find_elements(By.CSS_SELECTOR, "#controls > button")] if len(d.find_elements(By.CSS_SELECTOR, "#controls > button")) > 3 else None, 5)
            out["labels"] = [b.text for b in d.find_elements(By.CSS_SELECTOR, "#controls > button")]
            until(lambda: pixel(0.5, 0.5), 5)
            out["card_before"] = bool(card())
            t0 = time.time()
            d.find_element(By.ID, "set-card-enabled").click()
            out["card_after"] = time.time() - t0 if until(card, 3) else None
            d.find_element(By.CSS_SELECTOR, "#more summary").click()
            field = d.find_element(By.ID, "value-video-bitrate")
            out["bitrate_shown"] = field.get_attribute("value")
            out["bitrate_range"] = field.get_attribute("placeholder")
            field.clear(); field.send_keys("700k")
            d.find_element(By.ID, "set-video-bitrate").click()
            time.sleep(1)
            out["after_set"] = d.find_element(By.ID, "reply").text
            d.find_element(By.ID, "cmd-keep-clip").click()
            out["clip_reply"] = until(lambda: (t := d.find_element(By.ID, "reply").text).startswith("clip:") and t, 5)
        finally:
            d.quit()
        print(json.dumps(out))
        """#, ["http://127.0.0.1:\(port)/"]) as? [String: Any])
        print("the renamed pipeline's page: \(seen)")
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
        XCTAssertEqual(seen["buttons"] as? [String], ["pause", "set-card-enabled", "set-blend-mute-appsound", "set-blend-mute-micsound", "cmd-keep-clip"])
        XCTAssertEqual(seen["card_before"] as? Bool, false)
        XCTAssertLessThanOrEqual(try XCTUnwrap(seen["card_after"] as? Double, "the card never showed: \(seen)"), 2)
        XCTAssertNotNil(run.events.first { $0["event"] as? String == "applied" && $0["node"] as? String == "card" && $0["option"] as? String == "enabled" })
        XCTAssertEqual(seen["bitrate_shown"] as? String, "1M", "the file's 1000k as the option's type writes it")
        XCTAssertEqual(seen["bitrate_range"] as? String, "10k..200M")
        XCTAssertEqual(seen["after_set"] as? String, "", "no refusal")
        let bitrate = run.events.first { $0["event"] as? String == "applied" && $0["node"] as? String == "video" && $0["option"] as? String == "bitrate" }
        XCTAssertEqual(bitrate.map { "\($0["value"] ?? "")" }, "700000", "the encoder took the bitrate typed on the page")
        // The clip: in clips/ of the run's folder, named by the server; its packets as the reply says.
        let reply = try XCTUnwrap(seen["clip_reply"] as? String, "no clip reply: \(seen)")
        let clips = try FileManager.default.contentsOfDirectory(atPath: dir + "/clips").filter { $0.hasSuffix(".mp4") }
        XCTAssertEqual(clips.count, 1, reply)
        let clip = dir + "/clips/" + (clips.first ?? "")
        XCTAssertTrue(reply.contains("path \(clip)"), reply)
        let packets = try CLI.shell(["ffprobe", "-v", "error", "-count_packets", "-show_entries", "stream=nb_read_packets", "-of", "csv=p=0", clip])
            .split(separator: "\n").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }.reduce(0, +)
        XCTAssertTrue(reply.contains("packets \(packets)"), "\(reply): ffprobe counts \(packets)")
        XCTAssertGreaterThan(packets, 60)
    }

    func testRemoteAddressNeedsTheFlagAndThenTheToken() throws {
        let dir = CLI.scratch()
        let refused = try CLI.run(["run", CLI.packageRoot + "/pipelines/live.pipe", "--http", "0.0.0.0:8090", "--set", "out.path=\(dir)/x.mp4"])
        XCTAssertEqual(refused.status, 2, refused.stderr)
        XCTAssertTrue(refused.stderr.contains("--http 0.0.0.0:8090 is not a loopback address: add --http-allow-remote"), refused.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/x.mp4"))

        let port = try LoopbackPort.free()
        let token = "t0ken-for-the-test-0123456789"
        let run = try BackgroundRun(["run", CLI.packageRoot + "/pipelines/live.pipe", "--http", "0.0.0.0:\(port)", "--http-allow-remote",
                                     "--http-token", token, "--duration", "4s", "--events", "json", "--control", dir + "/ctl.sock",
                                     "--set", "out.path=\(dir)/remote.mp4"])
        XCTAssertNotNil(run.waitFor { $0["event"] as? String == "start" }, run.stderr)
        func status(_ path: String, _ extra: [String] = []) throws -> String {
            try CLI.shell(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5"] + extra + ["http://127.0.0.1:\(port)\(path)"])
        }
        XCTAssertEqual(try status("/"), "401")
        XCTAssertEqual(try status("/api/stats"), "401")
        XCTAssertEqual(try status("/?token=wrong-token-wrong-token-00"), "401")
        XCTAssertEqual(try status("/?token=\(token)"), "200")
        XCTAssertEqual(try status("/api/stats", ["-H", "X-Avgraph-Token: \(token)"]), "200")
        XCTAssertEqual(try status("/api/ctl", ["-X", "POST", "-d", "{\"cmd\":\"pause\"}"]), "401")
        XCTAssertEqual(try status("/api/ctl", ["-X", "POST", "-H", "X-Avgraph-Token: \(token)", "-d", "{\"cmd\":\"clip\",\"action\":\"save\",\"path\":\"/etc/x\"}"]), "403")
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
        XCTAssertFalse(run.events.contains { $0["event"] as? String == "paused" }, "a command without the token did nothing")
    }

    func testOnLoopbackReadingNeedsNoTokenButACommandDoes() throws {
        let dir = CLI.scratch()
        let (run, port) = try startLivePage(dir, duration: "3s", recording: dir + "/l.mp4")
        let base = "http://127.0.0.1:\(port)"
        let page = try CLI.shell(["curl", "-s", "--max-time", "5", base + "/"])
        let token = try XCTUnwrap(page.range(of: #"const token = "[0-9a-f]{32}""#, options: .regularExpression).map { String(page[$0].dropFirst(15).dropLast()) })
        let jpeg = try CLI.capture(["curl", "-s", "--max-time", "5", "--retry", "5", "--retry-all-errors", "--retry-delay", "1", base + "/api/preview.jpg"])
        XCTAssertEqual(Array(jpeg.prefix(3)), [0xFF, 0xD8, 0xFF], "a JPEG")
        let refused = try CLI.shell(["curl", "-s", "--max-time", "5", "-X", "POST", "-d", "{\"cmd\":\"stats\"}", base + "/api/ctl"])
        XCTAssertTrue(refused.hasPrefix("401"), refused)
        let answer = try CLI.shell(["curl", "-s", "--max-time", "5", "-X", "POST", "-H", "X-Avgraph-Token: \(token)",
                                    "-d", "{\"cmd\":\"get\",\"node\":\"video\",\"option\":\"bitrate\"}", base + "/api/ctl"])
        let viaSocket = try CLI.run(["ctl", dir + "/ctl.sock", "get", "video.bitrate"])
        XCTAssertTrue(answer.contains("\"value\":\"2500k\"") || answer.contains("\"value\":\"2500000\""), answer)
        XCTAssertTrue(viaSocket.stdout.contains("2500"), "ctl answers the same: \(viaSocket.stdout) \(viaSocket.stderr)")
        XCTAssertEqual(try CLI.shell(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", base + "/nothing"]), "404")
        XCTAssertEqual(run.waitForExit(timeout: 60), 0, run.stderr)
    }
}
