"""W8 of bench/run:
  W8  phones recorded as sent: N phones (720x1280 H.264 30 fps 2.5 Mbit/s, 2 s GOP, AAC stereo; 30 s, a
      privacy span of 10 s a minute: on 10.5 s, off 15.5 s, in-band) each published in realtime by
      scripts/rtmp-publish to its own recorder process: avgraph with `h264 passthrough: auto` and `aac
      passthrough: auto`, avgraph transcoding (veryfast 2500k, AAC), `ffmpeg -listen 1 -c copy` (which
      hides nothing); N from 1, 4, 8, (12,) 16, 30 (transcoding 1..6) until a stream is lost
      (AVGRAPH_W8_CASES="passthrough:1,4;copy:1" runs only those): a stream is held when its MP4 has every picture and
      its recorder ended within 1.5 s of its phone leaving (plus the source's 3 s idle); the recorders'
      CPU (os.wait4) and peak RSS / sampled RssAnon per stream; the publishers' CPU is not counted
"""
import os
import signal
import socket as socketlib
import statistics
import subprocess
import time

from .common import (AVGRAPH, INPUTS, OUT, RATE, ROOT, events, failures, ffmpeg_quiet, log, probe,
                     rss_split_kb)


W8_SIZE = (720, 1280)
W8_BITRATE = "2500k"
W8_IDLE = 3                  # s: the rtmp source ends the run this long after its publisher left
W8_LATE = 1.5                # s: a recorder ending later than this after its stream (and idle) fell behind
W8_CASES = {"passthrough": [1, 4, 8, 12, 16, 30], "copy": [1, 4, 8, 16, 30], "transcode": [1, 2, 3, 4, 5, 6]}
if os.environ.get("AVGRAPH_W8_CASES"):
    # e.g. "passthrough:1,4;copy:1": those cases only, at those N (a quick look at CPU per stream).
    W8_CASES = {c.split(":")[0]: [int(n) for n in c.split(":")[1].split(",")]
                for c in os.environ["AVGRAPH_W8_CASES"].split(";") if c.strip()}
PUBLISH = os.path.join(ROOT, "scripts", "rtmp-publish")


def w8_clip(seconds):
    """A phone's broadcast: 720x1280 H.264 at 30 fps, 2.5 Mbit/s, a keyframe every 2 s, no
    B-frames (a phone's realtime encoder sends none), AAC 48 kHz stereo (the rtmp source's
    default channels: `aac passthrough` forwards it), as FLV for rtmp-publish."""
    path = os.path.join(INPUTS, f"w8-phone-stereo-{seconds}s.flv")
    if not os.path.exists(path):
        w, h = W8_SIZE
        ffmpeg_quiet("-f", "lavfi", "-i", f"testsrc2=s={w}x{h}:r={RATE}:d={seconds}", "-f", "lavfi",
                     "-i", f"sine=f=440:r=48000:d={seconds}", "-ac", "2", "-c:v", "libx264", "-preset", "veryfast",
                     "-profile:v", "main", "-g", "60", "-keyint_min", "60", "-sc_threshold", "0", "-bf", "0",
                     "-b:v", W8_BITRATE, "-maxrate", W8_BITRATE, "-bufsize", "5000k", "-pix_fmt", "yuv420p",
                     "-c:a", "aac", "-b:a", "128k", "-shortest", path + ".part.flv")
        os.replace(path + ".part.flv", path)
    return path


def w8_recorder(case, port, out):
    """The recording process of one phone: avgraph with the privacy node, `h264` and `aac`
    passing the phone's packets through (the source then decodes no picture: nothing reads
    one) or encoding every picture and sound, or ffmpeg copying (which hides nothing)."""
    url = f"rtmp://127.0.0.1:{port}/live/phone"
    if case == "copy":
        return ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-listen", "1", "-i", url,
                "-c", "copy", out]
    w, h = W8_SIZE
    # Encoding every picture needs one fixed size (a phone may turn): a resize before h264.
    video = ("video:   {type: h264, in: privacy, passthrough: auto" if case == "passthrough" else
             f"fit:     {{type: resize, in: privacy, size: {w}x{h}}}\n  video:   {{type: h264, in: fit")
    pipe = out[:-len(".mp4")] + ".pipe"
    with open(pipe, "w") as f:
        f.write(f"""pipeline: w8-{case}
nodes:
  phone:   {{type: rtmp, listen: true, idle: {W8_IDLE}s, size: {w}x{h}, url: "{url}"}}
  privacy: {{type: privacy, in: phone.video, image: {os.path.join(ROOT, 'assets', 'privacy.png')}}}
  {video}, preset: veryfast, bitrate: {W8_BITRATE}, queue: {{size: 60}}}}
  audio:   {{type: aac, in: phone.audio{", passthrough: auto" if case == "passthrough" else ""}}}
  out:     {{type: file, in: [video, audio], path: {out}}}
""")
    return [AVGRAPH, "run", pipe, "--events", "json"]


def listening_ports():
    """Loopback TCP ports in LISTEN state (read from the kernel: a probing connect would be taken
    for a publisher by a listener that accepts one)."""
    ports = set()
    for line in open("/proc/net/tcp").readlines()[1:]:
        fields = line.split()
        if fields[3] == "0A":
            ports.add(int(fields[1].split(":")[1], 16))
    return ports


def exited(pid):
    """Whether a child has exited (a zombie not yet waited for), without reaping it."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def free_port(taken):
    """A loopback port below the kernel's ephemeral range (a port bind(0) hands out may become a
    publisher's own end before its recorder listens on it), free now and not yet given out."""
    import random
    while True:
        port = random.randrange(20000, 32000)
        if port in taken:
            continue
        with socketlib.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        taken.add(port)
        return port


def w8(seconds):
    """N phones at once, each published in realtime by scripts/rtmp-publish to its own recorder
    process; per case N grows through W8_CASES until a trial loses a stream."""
    clip = w8_clip(seconds)
    expected = probe(clip)["frames"]
    # A privacy span of 10 s a minute: 5 s of a 30 s stream, switched on and off mid-GOP.
    span = (seconds / 3 + 0.5, seconds / 6)
    cases = {}
    for case, ns in W8_CASES.items():
        rows, held = [], 0
        for n in ns:
            t = w8_trial(case, n, seconds, clip, expected, span)
            rows.append(t)
            whole = all(s["held"] for s in t["streams"])
            log(f"  W8 {n:2} x {case:11}: {sum(s['held'] for s in t['streams'])}/{n} streams held (pictures per stream min "
                f"{min(s['frames'] for s in t['streams'])} of {expected}, latest end {max(s['late'] for s in t['streams']):.2f} s "
                f"after its stream); cpu {t['cpu_per_stream_s']:.2f} s per {seconds} s stream ({t['cores']:.2f} cores in all); "
                f"peak rss {t['rss_mb_per_stream']:.0f} MB, anon {t['anon_mb_per_stream']:.0f} MB per stream"
                + (f"; pictures passed/encoded per stream {t['passed']}/{t['encoded']}" if case == "passthrough" else "")
                + f"; load {t['load']:.1f}")
            if not whole:
                break
            held = n
        cases[case] = {"held": held, "tried": [r["streams_n"] for r in rows], "rows": rows}
    log("  W8 streams held (every picture, in realtime): " + ", ".join(f"{c} {e['held']} (tried {e['tried']})" for c, e in cases.items()))
    return {"seconds": seconds, "expected": expected, "privacy_span": span, "cases": cases}


def w8_trial(case, n, seconds, clip, expected, span):
    """Starts n recorders; each phone's publisher starts as soon as its recorder listens. CPU and
    peak RSS are the recorders' own (os.wait4), RssAnon sampled every 0.25 s."""
    procs, taken = [], set()
    for k in range(n):
        out = os.path.join(OUT, f"w8-{case}-{k}.mp4")
        if os.path.exists(out):
            os.remove(out)
        port = free_port(taken)
        so = os.path.join(OUT, f"w8-{case}-{k}.out")
        with open(so, "w") as f:
            procs.append({"p": subprocess.Popen(w8_recorder(case, port, out), stdout=f, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL),
                          "port": port, "out": out, "so": so, "anon": 0})
    waiting = list(procs)
    deadline = time.monotonic() + 60
    while waiting and time.monotonic() < deadline and not any(exited(q["p"].pid) for q in waiting):
        ports = listening_ports()
        for q in [q for q in waiting if q["port"] in ports]:
            url = f"rtmp://127.0.0.1:{q['port']}/live/phone"
            q["pub"] = subprocess.Popen([PUBLISH, clip, url, "--privacy", f"{int(span[0] * 1000)}ms:{int(span[1] * 1000)}ms"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            q["pub_start"] = time.monotonic()
            waiting.remove(q)
        time.sleep(0.05)
    for q in waiting:
        failures.append(f"W8 {case} x {n}: a recorder never listened: {open(q['so']).read()[-300:]}")
        os.kill(q["p"].pid, signal.SIGKILL)     # not Popen.kill: it would reap the child, and its rusage with it
    pending = list(procs)
    cpu = rss = 0.0
    last_sample = 0.0
    while pending:
        now = time.monotonic()
        for q in [q for q in procs if q.get("pub") and "pub_end" not in q and q["pub"].poll() is not None]:
            q["pub_end"] = now
        if now - last_sample >= 0.25:
            last_sample = now
            for q in pending:
                q["anon"] = max(q["anon"], rss_split_kb(q["p"].pid)[0])
        for q in list(pending):
            pid, status, ru = os.wait4(q["p"].pid, os.WNOHANG)
            if pid:
                q["exit"] = os.waitstatus_to_exitcode(status)
                q["end"] = time.monotonic()
                cpu += ru.ru_utime + ru.ru_stime
                q["rss"] = ru.ru_maxrss / 1024.0
                pending.remove(q)
            elif now > q.get("pub_end", now) + W8_IDLE + 20 or now > q.get("pub_start", now) + seconds + 120:
                os.kill(q["p"].pid, signal.SIGKILL)
        time.sleep(0.05)
    for q in procs:
        if q.get("pub"):
            q["pub"].wait()
            q.setdefault("pub_end", time.monotonic())
    streams = []
    passed, encoded = [], []
    for q in procs:
        o = probe(q["out"]) if os.path.exists(q["out"]) else None
        frames = o["frames"] if o else 0
        pub_code = q["pub"].returncode if q.get("pub") else None
        # When its phone left, a recorder had this long to write what it still held: behind that,
        # it fell behind realtime (the publisher itself never waits: loopback's socket buffers
        # hold seconds of a 2.5 Mbit/s stream).
        late = q["end"] - q.get("pub_end", q["end"]) - (0 if case == "copy" else W8_IDLE)
        pub_late = q.get("pub_end", 0) - q.get("pub_start", 0) - seconds
        if case == "passthrough":
            account = next((e for e in events(q["so"]) if e.get("event") == "passthrough" and e.get("node") == "video"), {})
            passed.append(account.get("passed", 0))
            encoded.append(account.get("encoded", 0))
        held = frames >= expected and q["exit"] == 0 and pub_code == 0 and late <= W8_LATE
        if pub_code != 0 or (q["exit"] != 0):
            failures.append(f"W8 {case} x {n}: recorder exited {q['exit']}, publisher {pub_code}: "
                            f"{open(q['so']).read()[-200:]} {q['pub'].stderr.read().decode()[-200:] if q.get('pub') else ''}")
        streams.append({"held": held, "frames": frames, "late": round(late, 2), "publisher_late": round(pub_late, 2),
                        "exit": q["exit"], "rss_mb": round(q["rss"], 1), "anon_mb": round(q["anon"] / 1024.0, 1)})
    wall = max(q["end"] for q in procs) - min(q.get("pub_start", q["end"]) for q in procs)
    return {"streams_n": n, "streams": streams, "cpu_s": round(cpu, 2), "cpu_per_stream_s": round(cpu / n, 3),
            "cores": round(cpu / max(wall, 1e-6), 2),
            "rss_mb_per_stream": statistics.median(s["rss_mb"] for s in streams),
            "anon_mb_per_stream": statistics.median(s["anon_mb"] for s in streams),
            "passed": statistics.median(passed) if passed else None, "encoded": statistics.median(encoded) if encoded else None,
            "load": os.getloadavg()[0]}
