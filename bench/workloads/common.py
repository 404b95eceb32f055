"""What bench/run's workloads share: the inputs (made under bench/.inputs: 60 frames of a 1170x2532
NV12 phone screen, looped 30 times; 60 s of app audio, 44.1 kHz stereo, and of mic audio, 48 kHz
mono; the 1280x720 privacy card), both tools' commands for W1's graph (bench/w1.pipe, bench/w2.pipe
and the ffmpeg CLI's -filter_complex), measuring a child (wall; CPU time, user+sys of the child,
os.wait4; peak RSS, ru_maxrss of the child; RssAnon and RssFile sampled every 50 ms), probing
outputs (ffprobe as the witness), medians and ratios, and `failures`: the broken or mismatching
outputs that make bench/run exit 1 (speed never does).
"""
import json
import os
import re
import statistics
import subprocess
import time

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # bench/, above workloads/
ROOT = os.path.dirname(BENCH)
INPUTS = os.path.join(BENCH, ".inputs")
OUT = os.path.join(BENCH, ".out")
AVGRAPH = os.path.join(ROOT, ".build", "release", "avgraph")
PUSH_EXAMPLE = os.path.join(ROOT, ".build", "release", "PushExample")

W, H, FRAMES_CLIP, LOOPS, RATE = 1170, 2532, 60, 30, 30
SCREEN = os.path.join(INPUTS, "screen.nv12")
APP = os.path.join(INPUTS, "app.s16le")
MIC = os.path.join(INPUTS, "mic.s16le")
CARD = os.path.join(INPUTS, "privacy.png")

failures = []


def log(msg=""):
    print(msg, flush=True)


def ffmpeg_quiet(*args):
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *args], check=True)


# ---------------------------------------------------------------- inputs

def make_inputs():
    os.makedirs(INPUTS, exist_ok=True)
    os.makedirs(OUT, exist_ok=True)
    if not os.path.exists(SCREEN) or os.path.getsize(SCREEN) != W * H * 3 // 2 * FRAMES_CLIP:
        log("making inputs: screen clip (60 frames 1170x2532 nv12, a scrolling list with a playing video)")
        page = os.path.join(INPUTS, "page.png")
        # A tall list page, drawn once (geq is slow; per frame it would take a minute): rows with a
        # coloured avatar, a title bar, a subtitle bar and a dotted "text" line, separators between.
        row = "mod(Y,220)"
        lum = (f"if(lt({row},4),200,if(between({row},40,160)*between(X,40,160),90,"
               f"if(between({row},50,74)*between(X,200,200+mod(floor(Y/220)*337,760)),40,"
               f"if(between({row},100,118)*between(X,200,200+mod(floor(Y/220)*211,880)),140,"
               f"if(between({row},130,144)*between(X,200,560)*lt(mod(X,37),30),170,240)))))")
        avatar = f"between({row},40,160)*between(X,40,160)"
        ffmpeg_quiet("-filter_complex",
                     f"color=c=0xf2f2f7:s={W}x{2 * H}:d=1,format=yuv444p,"
                     f"geq=lum='{lum}':cb='if({avatar},128+60*sin(floor(Y/220)),128)':cr='if({avatar},128+60*cos(floor(Y/220)),128)'",
                     "-frames:v", "1", page)
        # The page scrolls 42 px a frame under a status bar, with a video playing in the feed.
        ffmpeg_quiet("-loop", "1", "-r", str(RATE), "-i", page, "-filter_complex",
                     f"testsrc2=s=1090x620:r={RATE}[video];color=c=0xf2f2f7:s={W}x{H}:r={RATE}[canvas];"
                     f"[canvas][0:v]overlay=x=0:y='-mod(n*42,{H})'[scrolled];[scrolled][video]overlay=x=40:y=900,"
                     f"drawbox=x=0:y=0:w={W}:h=140:c=0x1c1c1e:t=fill,drawbox=x=0:y={H - 152}:w={W}:h=152:c=0xe5e5ea:t=fill,"
                     f"format=nv12[out]",
                     "-map", "[out]", "-frames:v", str(FRAMES_CLIP), "-f", "rawvideo", SCREEN + ".part")
        os.replace(SCREEN + ".part", SCREEN)
        os.remove(page)
    if not os.path.exists(APP):
        log("making inputs: 60 s of app audio (44.1 kHz stereo s16le) and mic audio (48 kHz mono s16le)")
        ffmpeg_quiet("-f", "lavfi", "-i",
                     "aevalsrc='0.25*sin(2*PI*440*t)+0.08*sin(2*PI*1320*t)*sin(2*PI*0.7*t)|"
                     "0.25*sin(2*PI*554.37*t)+0.05*sin(2*PI*3000*t)':s=44100:d=60",
                     "-f", "s16le", "-c:a", "pcm_s16le", APP + ".part")
        os.replace(APP + ".part", APP)
    if not os.path.exists(MIC):
        ffmpeg_quiet("-f", "lavfi", "-i", "aevalsrc='0.3*sin(2*PI*180*t)*(0.6+0.4*sin(2*PI*3*t))*gt(sin(2*PI*0.25*t),-0.5)':s=48000:d=60",
                     "-f", "s16le", "-c:a", "pcm_s16le", MIC + ".part")
        os.replace(MIC + ".part", MIC)
    if not os.path.exists(CARD):
        log("making inputs: 1280x720 privacy card")
        ffmpeg_quiet("-f", "lavfi", "-i",
                     "color=c=0x1c1c1e:s=1280x720,drawbox=x=560:y=250:w=160:h=140:c=0xe5e5ea:t=fill,"
                     "drawbox=x=590:y=190:w=100:h=80:c=0xe5e5ea:t=12,drawbox=x=630:y=300:w=20:h=50:c=0x1c1c1e:t=fill,"
                     "drawbox=x=440:y=470:w=400:h=24:c=0x8e8e93:t=fill",
                     "-frames:v", "1", CARD)


# ---------------------------------------------------------------- the ffmpeg side

FIT = "scale=1280:720:force_original_aspect_ratio=decrease:force_divisible_by=2{flags},pad=1280:720:(ow-iw)/2:(oh-ih)/2"


def ff_inputs(realtime, audio):
    re_ = ["-re"] if realtime else []
    args = [*re_, "-f", "rawvideo", "-pix_fmt", "nv12", "-video_size", f"{W}x{H}", "-framerate", str(RATE),
            "-stream_loop", str(LOOPS - 1), "-i", SCREEN, "-i", CARD]
    if audio:
        args += [*re_, "-f", "s16le", "-ar", "44100", "-ac", "2", "-i", APP,
                 *re_, "-f", "s16le", "-ar", "48000", "-ac", "1", "-i", MIC]
    return args


def ff_video_graph(flags="", out="v"):
    # transpose=1 is a 90° clockwise turn; the card is converted once to BT.709 limited like avgraph's.
    return (f"[0:v]transpose=1,{FIT.format(flags=flags)},format=yuv420p[base];"
            f"[1:v]scale=1280:720:out_color_matrix=bt709:out_range=tv,format=yuv420p[card];"
            f"[base][card]overlay=enable='gte(t,20)*lt(t,30)':format=yuv420[{out}]")


def ff_graph(audio):
    g = ff_video_graph()
    if audio:
        g += ";[3:a]aresample=44100,aformat=channel_layouts=stereo[micst];[2:a][micst]amix=inputs=2:normalize=0:duration=longest[a]"
    return g


def ff_maps(audio):
    return ["-map", "[v]"] + (["-map", "[a]"] if audio else [])


ENCODE = ["-c:v", "libx264", "-preset", "veryfast", "-profile:v", "high", "-b:v", "2500k", "-maxrate", "2500k",
          "-bufsize", "5000k", "-g", "60", "-bf", "0"]


def ffmpeg_cmd(workload, audio, seconds=None, output=None):
    realtime = workload in ("W3", "W4", "W5")
    cmd = ["ffmpeg", "-hide_banner", "-nostats", "-loglevel", "info", "-y", *ff_inputs(realtime, audio),
           "-filter_complex", ff_graph(audio), *ff_maps(audio)]
    if seconds:
        cmd += ["-t", str(seconds)]
    cmd += ["-progress", os.path.join(OUT, f"ffmpeg-{workload}.progress")]
    if workload == "W2":
        return cmd + ["-f", "null", "-"]
    cmd += ENCODE
    if realtime:
        # avgraph's live encoders default to x264's zerolatency tuning (H264Node.liveTuning): the
        # same encoding work on both sides.
        cmd += ["-tune", "zerolatency"]
    if audio:
        cmd += ["-c:a", "aac", "-b:a", "128k"]
    return cmd + ["-movflags", "+faststart", output]


# ---------------------------------------------------------------- the avgraph side

def pipe_for(name, audio):
    """The .pipe under bench/, or (while the audio nodes are missing from this build) a
    video-only copy next to it, so the video side still gets measured."""
    path = os.path.join(BENCH, name)
    if audio:
        return path
    text = open(path).read()
    keep = [l for l in text.splitlines() if not re.match(r"\s+(app|mic|mix|audio):", l)]
    text = "\n".join(keep).replace("[video, audio]", "[video]").replace("[smooth, mix]", "[smooth]") + "\n"
    video_only = os.path.join(BENCH, ".video-only-" + name)
    with open(video_only, "w") as f:
        f.write(text)
    return video_only


def avgraph_cmd(workload, audio, seconds=None, output=None):
    pipe = pipe_for("w2.pipe" if workload == "W2" else "w1.pipe", audio)
    cmd = [AVGRAPH, "run", pipe, "--events", "json"]
    if workload in ("W3", "W4", "W5"):
        cmd += ["--realtime"]
    if seconds:
        cmd += ["--duration", f"{seconds}s"]
    if output:
        cmd += ["--set", f"out.path={os.path.relpath(output, BENCH)}"]
    if workload == "W4":
        cmd += ["--set", "video.tune=zerolatency"]
    return cmd


# ---------------------------------------------------------------- measuring

def measure(cmd, stdout_path, stderr_path):
    with open(stdout_path, "w") as so, open(stderr_path, "w") as se:
        start = time.monotonic()
        p = subprocess.Popen(cmd, stdout=so, stderr=se, stdin=subprocess.DEVNULL)
        # Besides ru_maxrss (every resident page, shared library pages included), sample the
        # anonymous part: what a phone's memory limit counts (clean library pages are not).
        anon_peak = file_peak = 0
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            anon, file_ = rss_split_kb(p.pid)
            anon_peak = max(anon_peak, anon)
            file_peak = max(file_peak, file_)
            time.sleep(0.05)
        wall = time.monotonic() - start
        p.returncode = os.waitstatus_to_exitcode(status)
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "user": ru.ru_utime, "sys": ru.ru_stime,
            "rss_mb": ru.ru_maxrss / 1024.0, "anon_mb": anon_peak / 1024.0, "file_mb": file_peak / 1024.0,
            "exit": p.returncode}


def rss_split_kb(pid):
    """RssAnon and RssFile of a running process (sampled every 50 ms: peaks are the sampled maxima).
    RssAnon is the private, dirty memory a phone's budget counts; RssFile is mostly clean pages of
    shared libraries (and, for avgraph's rawvideo source, of the mapped input file)."""
    anon = file_ = 0
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("RssAnon:"):
                anon = int(line.split()[1])
            elif line.startswith("RssFile:"):
                file_ = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return anon, file_


def events(path):
    out = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def probe(path):
    """Video frame count, size and container duration of an output file (ffprobe as the witness)."""
    r = subprocess.run(["ffprobe", "-v", "error", "-count_packets", "-show_entries",
                        "stream=codec_type,width,height,nb_read_packets:format=duration", "-of", "json", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    j = json.loads(r.stdout)
    v = [s for s in j.get("streams", []) if s.get("codec_type") == "video"]
    a = [s for s in j.get("streams", []) if s.get("codec_type") == "audio"]
    if not v:
        return None
    return {"frames": int(v[0]["nb_read_packets"]), "size": f"{v[0]['width']}x{v[0]['height']}",
            "duration": round(float(j["format"]["duration"]), 3), "audio": bool(a)}


def progress(path):
    """Frames and media time of an ffmpeg run, from its -progress file."""
    frames, t = None, None
    for line in open(path):
        k, _, v = line.strip().partition("=")
        if k == "frame":
            frames = int(v)
        elif k == "out_time_us" and v.lstrip("-").isdigit():
            t = int(v) / 1e6
    return frames, t


def check_same(workload, a, b):
    """Both tools made the same thing: frame count, picture size, duration (within a frame or two of audio)."""
    problems = []
    if a is None or b is None:
        problems.append("an output is missing or unreadable")
    else:
        if a["frames"] != b["frames"]:
            text = f"frame counts differ: avgraph {a['frames']}, ffmpeg {b['frames']}"
            # Live runs drop pictures by design when the machine (shared here) falls behind.
            if workload == "W3" and abs(a["frames"] - b["frames"]) <= 0.05 * max(a["frames"], b["frames"]):
                log(f"  warning: {text} (realtime drops on a busy machine)")
            else:
                problems.append(text)
        if a["size"] != b["size"]:
            problems.append(f"sizes differ: avgraph {a['size']}, ffmpeg {b['size']}")
        if abs(a["duration"] - b["duration"]) > 0.1:
            problems.append(f"durations differ: avgraph {a['duration']} s, ffmpeg {b['duration']} s")
    for p in problems:
        failures.append(f"{workload}: {p}")
    return problems


def run_pair(workload, runs, audio, seconds=None):
    """A B A B ...: avgraph then ffmpeg, `runs` times, so drift of the machine hits both alike."""
    results = {"avgraph": [], "ffmpeg": []}
    checks = {}
    for i in range(runs):
        for tool in ("avgraph", "ffmpeg"):
            output = os.path.join(OUT, f"{workload.lower()}-{tool}.mp4") if workload != "W2" else None
            cmd = (avgraph_cmd if tool == "avgraph" else ffmpeg_cmd)(workload, audio, seconds, output)
            so = os.path.join(OUT, f"{tool}-{workload}.out")
            se = os.path.join(OUT, f"{tool}-{workload}.err")
            m = measure(cmd, so, se)
            if m["exit"] != 0:
                failures.append(f"{workload}: {tool} exited {m['exit']} (see {os.path.relpath(se, ROOT)})")
                log(f"  {workload} {tool} run {i + 1}: FAILED, exit {m['exit']}: {open(se).read()[-400:]}")
                results[tool].append(m)
                continue
            if tool == "avgraph":
                ev = events(so)
                m["events"] = {e["event"]: e for e in ev if e.get("event") in ("eos", "latency", "null")}
                if workload == "W2":
                    null = m["events"].get("null", {})
                    m["out"] = {"frames": (null.get("counts") or [None])[0], "size": avgraph_size(audio),
                                "duration": round(m["events"].get("eos", {}).get("media_time", 0) + 1 / RATE, 3)}
            else:
                if workload == "W2":
                    frames, t = progress(os.path.join(OUT, f"ffmpeg-{workload}.progress"))
                    size = re.search(r"Output #0.*?Video: wrapped_avframe.*?(\d+x\d+)", open(se).read(), re.S)
                    m["out"] = {"frames": frames, "size": size.group(1) if size else None,
                                "duration": round(t, 3) if t is not None else None}
            if output:
                m["out"] = probe(output)
            results[tool].append(m)
            log(f"  {workload} {tool:7} run {i + 1}: wall {m['wall']:6.2f} s  cpu {m['cpu']:6.2f} s  "
                f"peak rss {m['rss_mb']:6.1f} MB (anon {m['anon_mb']:5.1f}, file {m['file_mb']:5.1f})  {fmt_out(m.get('out'))}")
        if i == 0:
            a = results["avgraph"][-1].get("out")
            b = results["ffmpeg"][-1].get("out")
            if workload == "W2" and a and b:
                # A null sink has no container: media time is the last frame's end.
                a = dict(a); b = dict(b)
            checks = {"avgraph": a, "ffmpeg": b, "problems": check_same(workload, a, b)}
    return results, checks


_size_cache = {}


def avgraph_size(audio):
    """The picture size reaching the null sink, as avgraph's own checker negotiates it."""
    if audio in _size_cache:
        return _size_cache[audio]
    r = subprocess.run([AVGRAPH, "check", "--format", "json", pipe_for("w2.pipe", audio)], capture_output=True, text=True)
    size = None
    try:
        for n in json.loads(r.stdout)["files"][0]["nodes"]:
            if n["name"] == "smooth":
                size = re.search(r"(\d+x\d+)", n["outputs"][0]).group(1)
    except (ValueError, KeyError, IndexError, AttributeError):
        pass
    _size_cache[audio] = size
    return size


def fmt_out(o):
    if not o:
        return ""
    return f"[{o.get('frames')} frames {o.get('size')} {o.get('duration')} s]"


def med(ms, key):
    vals = [m[key] for m in ms if m.get("exit") == 0]
    return statistics.median(vals) if vals else None


def summary(results):
    s = {}
    for tool, ms in results.items():
        s[tool] = {k: med(ms, k) for k in ("wall", "cpu", "rss_mb", "anon_mb", "file_mb")}
    a, b = s["avgraph"], s["ffmpeg"]
    s["ratio"] = {k: (a[k] / b[k] if a[k] and b[k] else None) for k in ("wall", "cpu", "rss_mb", "anon_mb", "file_mb")}
    return s


def strip(results):
    return {tool: [{k: v for k, v in m.items()} for m in ms] for tool, ms in results.items()}
