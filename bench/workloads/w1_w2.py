"""W1, W2, W3 and FLOOR of bench/run (graphs in bench/w1.pipe and bench/w2.pipe), each tool run
through common.run_pair, alternating A B A B:
  W1  the live graph to MP4: rotate 90° cw, fit 1280x720 with bars, privacy card 20-30 s,
      app + mic mixed to 44.1 kHz stereo, H.264 High veryfast 2500k GOP 60 no B, AAC 128k
  W2  the same graph without encoding, to a null sink
  FLOOR  x264 alone on W1's own work: the upright 1280x720 pictures of avgraph's W1 output,
      decoded once into memory (/dev/shm), encoded with W1's settings and thread count through
      avgraph's encoder wrapper (rawvideo -> h264 -> mp4) and through ffmpeg (-threads alike);
      W1's wall over the floor's is what avgraph spends besides x264 (runs with W1)
  W3  W1 paced in realtime (30 s): CPU time and peak resident memory
W1's outputs are also compared by SSIM against a lossless reference (ffmpeg's rendering of the
graph with a high-quality scaler).
"""
import os
import re
import subprocess

from .common import (AVGRAPH, ENCODE, OUT, RATE, failures, ff_inputs, ff_video_graph, fmt_out, log, measure,
                     probe, run_pair, strip, summary)


def w1_w2_w3(w, runs, audio, seconds, quick):
    """W1, W2 or W3 (`seconds`: W3's realtime length, else None): `runs` pairs, medians; W1's
    outputs then against the reference (SSIM, the first 25 s with --quick) and the floor."""
    r, checks = run_pair(w, runs, audio, seconds)
    entry = {"summary": summary(r), "checks": checks, "runs": strip(r)}
    if seconds:
        entry["seconds"] = seconds
    if w == "W1" and not checks.get("problems"):
        files = (os.path.join(OUT, "w1-avgraph.mp4"), os.path.join(OUT, "w1-ffmpeg.mp4"), 25 if quick else None)
        entry["ssim"] = ssim(*files)
        entry["ssim_transpose_chroma"] = ssim(*files, exact_chroma=False)
        if entry["ssim"] is None or entry["ssim_transpose_chroma"] is None:
            failures.append("W1: SSIM could not be computed")
        log("FLOOR:")
        entry["floor"] = floor(runs)
    return entry


# Where the chroma samples of the turned picture really sit. NV12 from a phone has them on the
# first luma column of each pair and between two luma rows (MPEG-2/H.264 "left": swscale position
# 0, 128 in 1/256 luma samples); a clockwise quarter turn puts them between two columns and on the
# first row (128, 0). ffmpeg's transpose moves the samples without saying so, and its scale then
# reads them as "left" again: a quarter chroma sample off in each direction. The reference is told.
EXACT_CHROMA = ":in_h_chr_pos=128:in_v_chr_pos=0:out_h_chr_pos=0:out_v_chr_pos=128"


def ssim(avg_mp4, ff_mp4, seconds, exact_chroma=True):
    """SSIM of both outputs against one reference: the same graph rendered by ffmpeg with a
    high-quality scaler, never encoded. One pass: the reference is split to two ssim filters.
    exact_chroma False: the reference places chroma as ffmpeg's transpose + scale does."""
    t = ["-t", str(seconds)] if seconds else []
    flags = ":flags=lanczos+accurate_rnd+full_chroma_int" + (EXACT_CHROMA if exact_chroma else "")
    graph = (ff_video_graph(flags=flags, out="ref") +
             ";[ref]split[r1][r2];[2:v]format=yuv420p[a];[3:v]format=yuv420p[b];"
             "[a][r1]ssim@avgraph[o1];[b][r2]ssim@ffmpeg[o2]")
    cmd = ["ffmpeg", "-hide_banner", "-nostats", "-loglevel", "info", *ff_inputs(False, False), *t, "-i", avg_mp4, *t, "-i", ff_mp4,
           "-filter_complex", graph, "-map", "[o1]", "-map", "[o2]", *t, "-f", "null", "-"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    found = re.findall(r"\[ssim@(\w+) @ [^\]]+\] SSIM Y:([0-9.]+) .*?U:([0-9.]+) .*?V:([0-9.]+) .*?All:([0-9.]+)", r.stderr)
    return {k: float(a) for k, y, u, v, a in found} | {f"{k}_yuv": [float(y), float(u), float(v)] for k, y, u, v, a in found} or None


FLOOR_YUV = "/dev/shm/avgraph-bench-floor.yuv"
FLOOR_THREADS = min(16, 2 * (os.cpu_count() or 1))  # what `h264` with threads: 0 uses offline


def floor(runs):
    """x264 alone on W1's pictures: W1's avgraph output decoded into memory, re-encoded with W1's
    settings by avgraph's own h264 node and by ffmpeg, alternating; medians of wall and CPU."""
    src = os.path.join(OUT, "w1-avgraph.mp4")
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-i", src, "-map", "0:v",
                    "-f", "rawvideo", "-pix_fmt", "yuv420p", FLOOR_YUV], check=True)
    frames = os.path.getsize(FLOOR_YUV) // (1280 * 720 * 3 // 2)
    pipe = os.path.join(OUT, "floor.pipe")
    with open(pipe, "w") as f:
        f.write("# bench/run's floor: x264 alone on W1's upright 720p pictures, W1's encoder settings.\n"
                "pipeline: bench-floor\nnodes:\n"
                f"  pictures: {{type: rawvideo, path: {FLOOR_YUV}, size: 1280x720, format: yuv420p, rate: 30}}\n"
                "  video:    {type: h264, in: pictures, bitrate: 2500k, gop: 60, bframes: 0, profile: high, preset: veryfast}\n"
                f"  out:      {{type: file, in: [video], path: {OUT}/floor-avgraph.mp4, overwrite: true, faststart: true}}\n")
    cmds = {"avgraph": [AVGRAPH, "run", pipe],
            "ffmpeg": ["ffmpeg", "-hide_banner", "-nostats", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "yuv420p",
                       "-video_size", "1280x720", "-framerate", str(RATE), "-i", FLOOR_YUV, *ENCODE,
                       "-threads", str(FLOOR_THREADS), "-movflags", "+faststart", os.path.join(OUT, "floor-ffmpeg.mp4")]}
    results = {"avgraph": [], "ffmpeg": []}
    try:
        for i in range(runs):
            for tool, cmd in cmds.items():
                m = measure(cmd, os.path.join(OUT, f"{tool}-floor.out"), os.path.join(OUT, f"{tool}-floor.err"))
                out = probe(os.path.join(OUT, f"floor-{tool}.mp4")) if m["exit"] == 0 else None
                if m["exit"] != 0 or not out or out.get("frames") != frames:
                    failures.append(f"FLOOR: {tool} exited {m['exit']} with {fmt_out(out)} (expected {frames} frames)")
                results[tool].append(m)
                log(f"  FLOOR {tool:7} run {i + 1}: wall {m['wall']:6.2f} s  cpu {m['cpu']:6.2f} s  {fmt_out(out)}")
    finally:
        os.unlink(FLOOR_YUV)
    return {"frames": frames, "threads": FLOOR_THREADS, "summary": summary(results), "runs": strip(results)}
