import AVGraphTesting
import Foundation
import XCTest

/// `scripts/ingest-server --http PORT`: the list of live streams, opened in chromium.
extension IngestServerTests {
    static let listBrowser = #"""
import json, sys, time
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
url = sys.argv[1]
o = webdriver.ChromeOptions()
for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]:
    o.add_argument(a)
o.binary_location = "/usr/bin/chromium"
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
out = {"streams": {}}
def until(f, timeout):
    end = time.time() + timeout
    while time.time() < end:
        try:
            v = f()
        except Exception:
            v = None
        if v: return v
        time.sleep(0.2)
    return None
SHOWN = "return [...document.querySelectorAll('li.stream')].filter(li => { const i = li.querySelector('img'); return i && i.complete && i.naturalWidth > 0; }).map(li => [li.dataset.name, li.querySelector('a').href]);"
try:
    d.get(url)
    shown = until(lambda: (lambda s: s if len(s) >= 2 else (d.refresh() or None))(d.execute_script(SHOWN)), 25) or []
    out["listed"] = sorted(name for name, _ in shown)
    for name, link in shown:
        d.get(url)
        until(lambda: d.find_element(By.CSS_SELECTOR, f'li.stream[data-name="{name}"] a'), 5).click()
        state = until(lambda: d.find_element(By.ID, "state").text in ("running", "paused") and d.find_element(By.ID, "state").text, 10)
        preview = until(lambda: d.execute_script("const i = document.getElementById('preview'); return i.complete && i.naturalWidth > 0 && i.naturalWidth"), 5)
        out["streams"][name] = {"link": link, "title": d.title, "state": state, "preview_width": preview}
finally:
    d.quit()
print(json.dumps(out))
"""#

    /// Two phones publish; the list shows both with a preview, and each entry opens that
    /// stream's own page (its run's title, its own preview).
    func testHttpListsTwoPublishingPhonesEachLinkingToItsOwnPage() throws {
        let dir = CLI.scratch()
        let out = dir + "/recordings"
        let clip = dir + "/phone.mp4"
        try phoneClip(clip, size: "720x1280", seconds: 40)
        let port = try LoopbackPort.free(), http = try LoopbackPort.free()
        let server = try startServer(dir: dir, port: port, out: out, extra: ["--http", String(http)])
        let publishers = try ["alice", "bob"].map { try publish(clip, port: port, name: $0) }
        defer { for p in publishers where p.isRunning { p.terminate() } }
        let seen = try XCTUnwrap(PythonWitness.run(Self.listBrowser, ["http://127.0.0.1:\(http)/"]) as? [String: Any])
        print("ingest list in chromium: \(seen)")
        kill(server.processIdentifier, SIGINT)
        server.waitUntilExit()
        XCTAssertEqual(seen["listed"] as? [String], ["alice", "bob"])
        let streams = seen["streams"] as? [String: [String: Any]] ?? [:]
        var links = Set<String>()
        for name in ["alice", "bob"] {
            let s = try XCTUnwrap(streams[name], "\(name) has no page")
            XCTAssertTrue((s["title"] as? String ?? "").hasPrefix("avgraph: s"), "\(name)'s link opens its own run's page (named after its session): \(s)")
            XCTAssertEqual(s["state"] as? String, "running")
            XCTAssertGreaterThan(s["preview_width"] as? Int ?? 0, 0, "\(name)'s page shows its picture")
            links.insert(s["link"] as? String ?? "")
        }
        XCTAssertEqual(links.count, 2, "a page each")
    }
}
