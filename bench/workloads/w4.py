"""W4 of bench/run:
  W4  W1 in realtime with tune zerolatency: source emission -> encoded packet latency (avgraph),
      and `ctl set privacy.enabled` every second: command to the privacy node taking it
"""
import json
import os
import socket as socketlib
import statistics
import threading
import time

from .common import OUT, avgraph_cmd, events, failures, log, measure


class PrivacySwitcher(threading.Thread):
    """The operator's switch under W4's load: every second (from 2 s in) `set privacy.enabled`
    on and off over the run's control socket, timing each request to its reply, which the run
    sends once the privacy node has taken the change: before its next picture, so each covered
    picture after it goes on through fps and the encoder (W4's source->packet latency)."""

    def __init__(self, socket_path, seconds):
        super().__init__(daemon=True)
        self.socket_path, self.seconds = socket_path, seconds
        self.ms = []
        self.errors = []

    def run(self):
        deadline = time.monotonic() + 10
        while not os.path.exists(self.socket_path):
            if time.monotonic() > deadline:
                self.errors.append("no control socket")
                return
            time.sleep(0.05)
        time.sleep(2)
        try:
            with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as sock:
                sock.connect(self.socket_path)
                replies = sock.makefile("r")
                for k in range(int(self.seconds) - 4):
                    line = json.dumps({"cmd": "set", "node": "privacy", "option": "enabled", "value": k % 2 == 0, "id": k})
                    start = time.monotonic()
                    sock.sendall((line + "\n").encode())
                    reply = json.loads(replies.readline())
                    if reply.get("ok"):
                        self.ms.append((time.monotonic() - start) * 1000)
                    else:
                        self.errors.append(reply.get("error", "?"))
                    time.sleep(max(0, 1 - (time.monotonic() - start)))
        except (OSError, ValueError) as e:
            self.errors.append(str(e))


def w4(audio, seconds, runs):
    lat = []
    ms = []
    switches = []
    for i in range(runs):
        out = os.path.join(OUT, "w4-avgraph.mp4")
        so, se = os.path.join(OUT, "avgraph-W4.out"), os.path.join(OUT, "avgraph-W4.err")
        control = os.path.join(OUT, "w4-control.sock")
        switcher = PrivacySwitcher(control, seconds)
        switcher.start()
        m = measure(avgraph_cmd("W4", audio, seconds, out) + ["--control", control], so, se)
        switcher.join(timeout=5)
        if switcher.ms:
            q = quantiles(switcher.ms)
            m["privacy_switch"] = {"count": len(switcher.ms), "p50_ms": q[0], "p99_ms": q[1], "max_ms": max(switcher.ms)}
            switches.append(m["privacy_switch"])
            log(f"  W4 avgraph run {i + 1}: ctl privacy switch, command to taken: p50 {q[0]:.1f} ms  p99 {q[1]:.1f} ms  "
                f"max {max(switcher.ms):.1f} ms over {len(switcher.ms)} switches")
        if switcher.errors:
            failures.append(f"W4: privacy switch: {switcher.errors[0]}")
        ev = [e for e in events(so) if e.get("event") == "latency"]
        if m["exit"] != 0:
            failures.append(f"W4: avgraph exited {m['exit']}")
        m["latency"] = ev[-1] if ev else None
        ms.append(m)
        if ev:
            lat.append(ev[-1])
            log(f"  W4 avgraph run {i + 1}: p50 {ev[-1]['p50_ms']:.1f} ms  p99 {ev[-1]['p99_ms']:.1f} ms  "
                f"max {ev[-1]['max_ms']:.1f} ms over {ev[-1]['count']} packets; cpu {m['cpu']:.2f} s, peak rss {m['rss_mb']:.1f} MB "
                f"(anonymous {m['anon_mb']:.1f} MB, file {m['file_mb']:.1f} MB)")
        else:
            log(f"  W4 avgraph run {i + 1}: no latency event (this build does not measure it)")
    entry = {"seconds": seconds, "runs": ms}
    if lat:
        entry["p50_ms"] = statistics.median(e["p50_ms"] for e in lat)
        entry["p99_ms"] = statistics.median(e["p99_ms"] for e in lat)
    if switches:
        entry["privacy_switch"] = {"p50_ms": statistics.median(e["p50_ms"] for e in switches),
                                   "p99_ms": statistics.median(e["p99_ms"] for e in switches),
                                   "count": sum(e["count"] for e in switches)}
    return ms, entry


def quantiles(values):
    """p50 and p99 of a sample (nearest rank)."""
    v = sorted(values)
    return v[len(v) // 2], v[min(len(v) - 1, int(len(v) * 0.99))]
