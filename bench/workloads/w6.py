"""W6 of bench/run:
  W6  an HLS ladder (bench/w6.pipe): the W1 input turned upright, privacy card 20-30 s, fitted to
      1920x1080, 1280x720, 854x480, 640x360, 4 x H.264 veryfast (5000k/2800k/1400k/800k, GOP 60 at
      the same timestamps, no B), AAC 128k, 2 s fMP4 segments; against one ffmpeg process (split +
      4 x libx264 + hls muxer with var_stream_map): offline wall, realtime pictures kept per
      rendition, SSIM per rendition against a lossless reference
"""
import os
import re
import shutil
import signal
import subprocess
import time

from .common import AVGRAPH, BENCH, FRAMES_CLIP, H, LOOPS, OUT, RATE, W, failures, ff_inputs, log, med, probe


W6_LADDER = [("1080p", 1920, 1080, "5000k"), ("720p", 1280, 720, "2800k"), ("480p", 854, 480, "1400k"), ("360p", 640, 360, "800k")]
W6_UPRIGHT = (H, W)          # the portrait screen turned 90° clockwise
W6_LATE = 1.5                # a realtime run still going this long after its media ended is stopped (SIGINT)


def w6_fit(w, h, flags=""):
    return f"scale={w}:{h}:force_original_aspect_ratio=decrease:force_divisible_by=2{flags},pad={w}:{h}:(ow-iw)/2:(oh-ih)/2"


def w6_video_graph(flags="", prefix="v"):
    """bench/w6.pipe's picture side in ffmpeg's words: turn, the card fitted into the upright
    picture 20-30 s, split 4 ways, each fitted to its rendition."""
    uw, uh = W6_UPRIGHT
    g = (f"[0:v]transpose=1[up];[1:v]{w6_fit(uw, uh)},scale=out_color_matrix=bt709:out_range=tv,format=yuv420p[card];"
         f"[up][card]overlay=enable='gte(t,20)*lt(t,30)':format=yuv420[priv];"
         f"[priv]split={len(W6_LADDER)}" + "".join(f"[s{i}]" for i in range(len(W6_LADDER))))
    for i, (_, w, h, _) in enumerate(W6_LADDER):
        g += f";[s{i}]{w6_fit(w, h, flags)},format=yuv420p[{prefix}{i}]"
    return g


def w6_ffmpeg_cmd(realtime, folder):
    graph = w6_video_graph() + (";[3:a]aresample=44100,aformat=channel_layouts=stereo[micst];"
                                "[2:a][micst]amix=inputs=2:normalize=0:duration=longest[a]")
    cmd = ["ffmpeg", "-hide_banner", "-nostats", "-loglevel", "info", "-y", *ff_inputs(realtime, True), "-filter_complex", graph]
    for i in range(len(W6_LADDER)):
        cmd += ["-map", f"[v{i}]"]
    cmd += ["-map", "[a]", "-c:v", "libx264", "-preset", "veryfast", "-profile:v", "high", "-bf", "0",
            "-g", "60", "-keyint_min", "60", "-sc_threshold", "0"]
    if realtime:
        cmd += ["-tune", "zerolatency"]       # avgraph's live encoders' default (H264Node.liveTuning)
    for i, (_, _, _, rate) in enumerate(W6_LADDER):
        kbit = int(rate[:-1])
        cmd += [f"-b:v:{i}", rate, f"-maxrate:v:{i}", rate, f"-bufsize:v:{i}", f"{2 * kbit}k"]
    # One AAC encode, as avgraph does; ffmpeg cannot mux one encoded stream into 4 variants, so
    # its audio is a rendition of its own (agroup), which only makes ffmpeg's side lighter.
    vmap = " ".join(f"v:{i},agroup:aud,name:{name}" for i, (name, _, _, _) in enumerate(W6_LADDER))
    return cmd + ["-c:a", "aac", "-b:a", "128k", "-f", "hls", "-hls_time", "2", "-hls_list_size", "0",
                  "-hls_playlist_type", "event", "-hls_segment_type", "fmp4", "-hls_fmp4_init_filename", "init.mp4",
                  "-hls_flags", "temp_file+program_date_time+independent_segments", "-master_pl_name", "master.m3u8",
                  "-hls_segment_filename", os.path.join(folder, "%v", "seg_%05d.m4s"),
                  "-var_stream_map", vmap + " a:0,agroup:aud,name:audio", os.path.join(folder, "%v", "index.m3u8")]


def w6_avgraph_cmd(realtime, folder):
    cmd = [AVGRAPH, "run", os.path.join(BENCH, "w6.pipe"), "--events", "json",
           "--set", f"out.path={os.path.relpath(os.path.join(folder, 'master.m3u8'), BENCH)}"]
    return cmd + (["--realtime"] if realtime else ["--offline"])


def w6_run(tool, realtime):
    """One run; realtime runs still going W6_LATE s after their 60 s are stopped with SIGINT (both
    tools then end their playlists) and keep what they had done."""
    folder = os.path.join(OUT, f"w6-{tool}" + ("-rt" if realtime else ""))
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    cmd = (w6_avgraph_cmd if tool == "avgraph" else w6_ffmpeg_cmd)(realtime, folder)
    so, se = os.path.join(OUT, f"{tool}-W6.out"), os.path.join(OUT, f"{tool}-W6.err")
    start = time.monotonic()
    with open(so, "w") as o, open(se, "w") as e:
        p = subprocess.Popen(cmd, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
        stopped = False
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if realtime and not stopped and time.monotonic() - start > LOOPS * FRAMES_CLIP / RATE + W6_LATE:
                p.send_signal(signal.SIGINT)
                stopped = True
            time.sleep(0.05)
    m = {"wall": time.monotonic() - start, "cpu": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024.0,
         "exit": os.waitstatus_to_exitcode(status), "stopped": stopped, "folder": folder, "renditions": {}}
    # ffmpeg answers the SIGINT that stops it with 255 after ending its playlists: not a failure.
    if m["exit"] != 0 and not stopped:
        failures.append(f"W6: {tool}{' realtime' if realtime else ''} exited {m['exit']}: {open(se).read()[-300:]}")
    for name, w, h, _ in W6_LADDER:
        o = probe(os.path.join(folder, name, "index.m3u8"))
        m["renditions"][name] = o
        if not o or o["size"] != f"{w}x{h}":
            failures.append(f"W6: {tool} rendition {name}: {o}")
    kept = ", ".join(f"{n} {(o or {}).get('frames')}" for n, o in m["renditions"].items())
    log(f"  W6 {tool:7} {'realtime' if realtime else 'offline '}: wall {m['wall']:6.2f} s  cpu {m['cpu']:6.2f} s  "
        f"peak rss {m['rss_mb']:6.1f} MB; pictures per rendition: {kept}{' (stopped)' if stopped else ''}; load {os.getloadavg()[0]:.1f}")
    return m


def w6_ssim(avgraph_folder, ffmpeg_folder, seconds):
    """SSIM of each tool's renditions against the lossless reference (bench/w6.pipe's graph
    rendered by ffmpeg with a high-quality scaler, never encoded), in one pass."""
    t = ["-t", str(seconds)] if seconds else []
    n = len(W6_LADDER)
    inputs = [*ff_inputs(False, False)]
    for folder in (avgraph_folder, ffmpeg_folder):
        for name, _, _, _ in W6_LADDER:
            inputs += [*t, "-i", os.path.join(folder, name, "index.m3u8")]
    graph = w6_video_graph(flags=":flags=lanczos+accurate_rnd+full_chroma_int", prefix="ref")
    outs = []
    for i, (name, _, _, _) in enumerate(W6_LADDER):
        graph += f";[ref{i}]setpts=PTS-STARTPTS,split[ra{i}][rf{i}]"
        for k, tool in enumerate(("avgraph", "ffmpeg")):
            graph += (f";[{2 + k * n + i}:v]setpts=PTS-STARTPTS,format=yuv420p[{tool}{i}];"
                      f"[{tool}{i}][r{tool[0]}{i}]ssim@{tool}_{name}[o{tool}{i}]")
            outs += ["-map", f"[o{tool}{i}]"]
    cmd = ["ffmpeg", "-hide_banner", "-nostats", "-loglevel", "info", *inputs, "-filter_complex", graph, *outs, *t, "-f", "null", "-"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    found = re.findall(r"\[ssim@(\w+?)_(\w+) @ [^\]]+\] SSIM .*?All:([0-9.]+)", r.stderr)
    if not found:
        log(f"  W6 SSIM failed: {r.stderr[-400:]}")
    q = {}
    for tool, name, v in found:
        q.setdefault(name, {})[tool] = float(v)
    return q or None


def w6(runs, quick):
    """Offline: `runs` pairs, avgraph then ffmpeg; realtime: one run each (60 s). Pictures kept per
    rendition are the pictures each rendition's playlist holds (ffprobe); SSIM per rendition
    against the lossless reference (the first 25 s with --quick)."""
    expected = LOOPS * FRAMES_CLIP
    offline = {"avgraph": [], "ffmpeg": []}
    for _ in range(runs):
        for tool in ("avgraph", "ffmpeg"):
            offline[tool].append(w6_run(tool, False))
    realtime = {tool: w6_run(tool, True) for tool in ("avgraph", "ffmpeg")}
    q = w6_ssim(offline["avgraph"][-1]["folder"], offline["ffmpeg"][-1]["folder"], 25 if quick else None)
    if q is None:
        failures.append("W6: SSIM could not be computed")
    walls = {tool: med(ms, "wall") for tool, ms in offline.items()}
    ratio = walls["avgraph"] / walls["ffmpeg"] if walls["avgraph"] and walls["ffmpeg"] else None
    kept = {tool: {n: (o or {}).get("frames") for n, o in m["renditions"].items()} for tool, m in realtime.items()}
    log(f"W6 offline wall: avgraph {f2(walls['avgraph'])} s, ffmpeg {f2(walls['ffmpeg'])} s, ratio {f2(ratio)}   (target <= 0.75)")
    for tool in ("avgraph", "ffmpeg"):
        log(f"W6 realtime pictures kept per rendition, {tool}: " + ", ".join(f"{n} {k}/{expected}" for n, k in kept[tool].items())
            + f"   (cpu {realtime[tool]['cpu']:.1f} s{', stopped late' if realtime[tool]['stopped'] else ''})")
    for name, v in (q or {}).items():
        a, f_ = v.get("avgraph"), v.get("ffmpeg")
        diff = abs(a - f_) if a is not None and f_ is not None else None
        log(f"W6 SSIM {name:5} vs reference: avgraph {f2(a, 4)}, ffmpeg {f2(f_, 4)}, difference {f2(diff, 4)}   (target <= 0.005)")
    strip_ = lambda m: {k: v for k, v in m.items() if k != "folder"}
    return {"offline": {t: [strip_(m) for m in ms] for t, ms in offline.items()}, "offline_wall_ratio": ratio,
            "realtime": {t: strip_(m) for t, m in realtime.items()}, "realtime_kept": kept, "expected": expected, "ssim": q}


def f2(v, digits=2):
    return f"{v:.{digits}f}" if isinstance(v, (int, float)) else "-"
