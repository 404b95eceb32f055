"""W5 of bench/run:
  W5  streams per machine: N = 1..6 concurrent W1 streams in realtime (20 s each), N avgraph
      processes against N ffmpeg processes; for each N the frames each stream kept (an avgraph
      stream: its recording's pictures less the pictures it dropped; an ffmpeg stream, which
      never drops: the pictures it had encoded when the 20 s were up, 1.5 s of grace), how late
      the last stream ended and the CPU; the largest N at which every stream of every run kept
      all 600 and ended within 0.4 s of its 20 s (one stream alone ends 0.1-0.2 s after: start-up;
      later means it fell behind real time and would keep falling) is the figure
"""
import os
import signal
import statistics
import subprocess
import time

from .common import OUT, RATE, avgraph_cmd, events, failures, ffmpeg_cmd, log, probe


# A W5 stream that ends later than this after its media's length fell behind real time.
W5_LATE = 0.4


def w5(audio, seconds, runs, max_streams):
    """N realtime W1 streams at once, N = 1..max_streams, `runs` trials per N and tool (avgraph
    then ffmpeg, alternating). Each stream reads the same inputs and writes its own MP4."""
    expected = seconds * RATE
    rows = []
    best = {"avgraph": 0, "ffmpeg": 0}
    broken = {"avgraph": False, "ffmpeg": False}
    for n in range(1, max_streams + 1):
        row = {"streams": n}
        for tool in ("avgraph", "ffmpeg"):
            trials = []
            for i in range(runs):
                trials.append(w5_trial(tool, n, seconds, audio, expected))
            kept = [s["kept"] for t in trials for s in t["streams"]]
            late = max(s["late"] for t in trials for s in t["streams"])
            whole = sum(1 for t in trials if all(s["kept"] >= expected and s["late"] <= W5_LATE for s in t["streams"]))
            cores = statistics.median(t["cpu"] / t["wall"] for t in trials)
            row[tool] = {"trials": trials, "kept_min": min(kept), "kept_median": statistics.median(kept), "late_max": late,
                         "runs_whole": whole, "cores": round(cores, 2), "cpu_per_stream_s": round(statistics.median(
                             t["cpu"] / n for t in trials), 2)}
            if whole == runs and not broken[tool]:
                best[tool] = n
            else:
                broken[tool] = True
            log(f"  W5 {n} x {tool:7}: frames kept per stream min {min(kept)}, median {statistics.median(kept):g} of "
                f"{expected}; last stream ended {late:.2f} s late; {whole}/{runs} runs kept every frame in time; cpu {cores:.2f} cores "
                f"({row[tool]['cpu_per_stream_s']:.2f} s per {seconds} s stream); load {os.getloadavg()[0]:.1f}")
        rows.append(row)
    return {"seconds": seconds, "expected": expected, "runs": runs, "rows": rows, "best": best}


def w5_trial(tool, n, seconds, audio, expected):
    """Starts n streams together; any still running 1.5 s after its media should have ended is
    stopped with SIGINT (both tools then close their MP4 properly) and keeps what it had done."""
    procs = []
    start = time.monotonic()
    for k in range(n):
        out = os.path.join(OUT, f"w5-{tool}-{k}.mp4")
        so = os.path.join(OUT, f"w5-{tool}-{k}.out")
        cmd = (avgraph_cmd if tool == "avgraph" else ffmpeg_cmd)("W5", audio, seconds, out)
        with open(so, "w") as f:
            procs.append({"p": subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL),
                          "out": out, "so": so})
    deadline = start + seconds + 1.5
    cpu = 0.0
    pending = list(procs)
    while pending:
        for q in list(pending):
            pid, status, ru = os.wait4(q["p"].pid, os.WNOHANG)
            if pid:
                q["exit"] = os.waitstatus_to_exitcode(status)
                q["wall"] = time.monotonic() - start
                cpu += ru.ru_utime + ru.ru_stime
                pending.remove(q)
        now = time.monotonic()
        for q in pending:
            if now >= deadline and not q.get("stopped"):
                q["stopped"] = True
                q["p"].send_signal(signal.SIGINT)
            if now >= deadline + 15:
                q["p"].kill()
        time.sleep(0.05)
    wall = max(q["wall"] for q in procs)
    streams = []
    for q in procs:
        o = probe(q["out"]) if os.path.exists(q["out"]) else None
        frames = o["frames"] if o else 0
        dropped = 0
        if tool == "avgraph":
            # Pictures dropped before `smooth` (fps) left holes that it filled with repeats, which
            # the file counts; those dropped at the encoder are already missing from the file.
            stats = [e for e in events(q["so"]) if e.get("event") == "stats"]
            nodes = stats[-1].get("nodes") or [] if stats else []
            upstream = {"screen", "upright", "fit", "privacy"}
            dropped = sum(n.get("dropped", 0) for n in nodes if n.get("node") in upstream) if stats else expected
        kept = max(0, min(frames, expected) - dropped)
        if q["exit"] != 0 and not q.get("stopped"):
            failures.append(f"W5: {tool} stream exited {q['exit']}: {open(q['so']).read()[-300:]}")
        streams.append({"kept": kept, "frames": frames, "dropped": dropped, "stopped": bool(q.get("stopped")),
                        "late": round(q["wall"] - seconds, 2),
                        "wall": round(q["wall"], 2), "exit": q["exit"]})
    return {"wall": wall, "cpu": cpu, "streams": streams}
