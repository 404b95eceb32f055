"""P1 of bench/run:
  P1  the push path a phone app uses (avgraph only: ffmpeg has no push API): Examples/PushExample
      pushes 1170x2532 NV12 pictures without a copy into an `app` source at 30 fps through the
      live graph into H.264/AAC, to an MP4 file and live to nginx-rtmp on loopback (started here);
      peak RssAnon (private memory, the phone's budget: <= 50 MB) sampled while it runs, by this
      script and by PushExample itself; pictures taken, slowest push; each recording ffprobed
"""
import os
import re
import statistics
import time

from .common import H, OUT, PUSH_EXAMPLE, RATE, W, failures, fmt_out, log, measure, probe
from .nginx import NginxRtmp


def p1(seconds, runs):
    """The phone push path, to a file and live to nginx-rtmp on loopback: PushExample's own
    account (pushes, peak RssAnon sampled from /proc/self/status while it runs) beside the
    kernel's as seen from here, each recording checked by ffprobe (30 s of 1280x720)."""
    nginx = NginxRtmp()
    cases = {}
    try:
        for case in ("file", "rtmp"):
            ms = []
            for i in range(runs):
                if case == "file":
                    out = os.path.join(OUT, "p1-avgraph.mp4")
                    target = out
                else:
                    target = nginx.url(f"p1-{i}")
                    before = set(nginx.sessions())
                so, se = os.path.join(OUT, f"avgraph-P1-{case}.out"), os.path.join(OUT, f"avgraph-P1-{case}.err")
                m = measure([PUSH_EXAMPLE, target, "--size", f"{W}x{H}", "--seconds", str(seconds)], so, se)
                text = open(so).read()
                pushed = re.search(r"pushed: (.*); slowest picture push ([0-9.]+) ms", text)
                m["pushed"] = pushed.group(1) if pushed else None
                m["slowest_push_ms"] = float(pushed.group(2)) if pushed else None
                own = re.search(r"peak RssAnon ([0-9.]+) MB", text)
                m["own_anon_mb"] = float(own.group(1)) if own else None
                if case == "rtmp":
                    time.sleep(1)       # nginx closes the recording when the session ends
                    new = sorted(set(nginx.sessions()) - before)
                    out = new[-1] if new else None
                o = probe(out) if m["exit"] == 0 and out and os.path.exists(out) else None
                m["output"] = o
                # The recording must hold the whole push at 1280x720; pictures the loaded machine
                # could not encode in time are dropped by design (and counted in the row).
                if (m["exit"] != 0 or not o or o["frames"] < seconds * RATE * 0.5 or o["size"] != "1280x720"
                        or o["duration"] < seconds - 0.5):
                    failures.append(f"P1 {case}: PushExample exited {m['exit']}, output {o}: {open(se).read()[-300:]}")
                ms.append(m)
                m["load"] = os.getloadavg()[0]
                log(f"  P1 {case} run {i + 1}: {seconds} s pushed at 30 fps; peak RssAnon {m['anon_mb']:.1f} MB sampled here, "
                    f"{m['own_anon_mb']} MB by PushExample (peak rss {m['rss_mb']:.1f}, file {m['file_mb']:.1f}); cpu {m['cpu']:.2f} s; "
                    f"{m['pushed']}; slowest push {m['slowest_push_ms']} ms {fmt_out(o)}; load {m['load']:.1f}")
            entry = {"runs": ms}
            for k in ("rss_mb", "anon_mb", "file_mb", "cpu"):
                entry[k] = statistics.median(m[k] for m in ms)
            entry["anon_max_mb"] = max(m["anon_mb"] for m in ms)
            cases[case] = entry
    finally:
        nginx.stop()
    return {"seconds": seconds, "cases": cases}
