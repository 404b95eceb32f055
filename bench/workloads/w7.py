"""W7 of bench/run:
  W7  a narrowing uplink (only with --only W7: needs root, ip, tc): a 4 Mbit/s broadcast (640x360 noise,
      AAC 128k) to nginx-rtmp through a link shaped by tc inside a network namespace made here (both
      ends on its loopback): 5 Mbit/s for 20 s, 1.5 Mbit/s for 20 s, 5 Mbit/s for 30 s; avgraph with
      h264 adaptive {min: 500k}, avgraph at a fixed 4M, ffmpeg at a fixed 4M, one after the other;
      an ffprobe subscriber reads the stream back: delay behind the source (arrival less media time,
      over the least seen on the wide link), disconnects, pictures lost, seconds from the link
      clearing to 90 % of the ceiling, the recording's decode errors
"""
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time

from .common import AVGRAPH, INPUTS, OUT, RATE, failures, ffmpeg_quiet, log
from .nginx import NginxRtmp


W7_SCHEDULE = [(20, 5.0), (20, 1.5), (30, 5.0)]     # seconds at Mbit/s
W7_CEILING = 4_000_000
W7_FLOOR = 500_000
W7_PORT = 1935
W7_NOISE = os.path.join(INPUTS, "w7-noise.mp4")
IP = shutil.which("ip") or "/usr/sbin/ip"
TC = shutil.which("tc") or "/usr/sbin/tc"


class ShapedLink:
    """A network namespace whose loopback carries what goes to `port` through a narrow htb class
    (the publisher's uplink; 60 kB of queue past which packets drop), the rest freely (the
    server's replies, the subscriber). Both ends run inside it (`ns`), on its loopback only.
    The configuration of Tests/EndToEndTests/ShapedLink.swift."""

    def __init__(self, megabits, port):
        self.name = f"avg-bench-w7-{os.getpid()}"
        subprocess.run([IP, "netns", "add", self.name], check=True)
        try:
            # Packets the size of a real link's: loopback's own (64 kB, more by GSO) would not fit the queue whole.
            self.run([IP, "link", "set", "lo", "mtu", "1500", "gso_max_size", "1500", "up"])
            self.run([TC, "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "20", "r2q", "1000"])
            self.run([TC, "class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb", *self.rate(megabits)])
            self.run([TC, "class", "add", "dev", "lo", "parent", "1:", "classid", "1:20", "htb", "rate", "10gbit"])
            self.run([TC, "qdisc", "add", "dev", "lo", "parent", "1:10", "handle", "10:", "bfifo", "limit", "60000"])
            self.run([TC, "filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "u32", "match", "ip", "dport",
                      str(port), "0xffff", "flowid", "1:10"])
        except Exception:
            self.remove()
            raise

    @staticmethod
    def rate(megabits):
        kbit = f"{int(megabits * 1000)}kbit"
        return ["rate", kbit, "ceil", kbit, "burst", str(max(3000, int(megabits * 1e6 / 8 * 0.02)))]

    def ns(self, cmd):
        return [IP, "netns", "exec", self.name, *cmd]

    def run(self, cmd):
        subprocess.run(self.ns(cmd), check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def set(self, megabits):
        self.run([TC, "class", "change", "dev", "lo", "parent", "1:", "classid", "1:10", "htb", *self.rate(megabits)])

    def remove(self):
        subprocess.run([IP, "netns", "delete", self.name], stderr=subprocess.DEVNULL)


def w7_inputs():
    if not os.path.exists(W7_NOISE):
        log("making inputs: 4 s of 640x360 noise (x264 needs all of 4 Mbit/s for it; a screen clip compresses far below)")
        ffmpeg_quiet("-f", "lavfi", "-i", "testsrc2=size=640x360:rate=30,noise=alls=30:allf=t", "-t", "4",
                     "-c:v", "libx264", "-preset", "ultrafast", "-crf", "14", "-g", "30", W7_NOISE + ".part.mp4")
        os.replace(W7_NOISE + ".part.mp4", W7_NOISE)


def w7_publisher(case, url, seconds):
    if case == "ffmpeg":
        return ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-re", "-stream_loop", "-1", "-i", W7_NOISE,
                "-re", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", str(seconds),
                "-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-preset", "veryfast", "-tune", "zerolatency",
                "-b:v", str(W7_CEILING), "-maxrate", str(W7_CEILING), "-bufsize", str(2 * W7_CEILING), "-g", "60", "-bf", "0",
                "-c:a", "aac", "-b:a", "128k", "-ac", "2", "-f", "flv", url]
    adaptive = f", adaptive: {{min: {W7_FLOOR // 1000}k}}" if case == "adaptive" else ""
    pipe = os.path.join(OUT, f"w7-{case}.pipe")
    with open(pipe, "w") as f:
        f.write(f"""pipeline: w7-{case}
realtime: true
duration: {seconds}s
nodes:
  screen: {{type: file, path: {W7_NOISE}, loop: true}}
  app:    {{type: tone, freq: 440, rate: 48000, channels: 2}}
  video:  {{type: h264, in: screen, bitrate: {W7_CEILING // 1000}k, gop: 60{adaptive}}}
  audio:  {{type: aac, in: app, bitrate: 128k}}
  live:   {{type: rtmp, in: [video, audio], url: "{url}", reconnect: {{attempts: 30, backoff: 500ms..2s}}}}
""")
    return [AVGRAPH, "run", pipe, "--events", "json"]


def w7_lines(proc, sink):
    """Each line `proc` prints, with the monotonic time it arrived."""
    for line in proc.stdout:
        sink.append((time.monotonic(), line))


def w7_run(link, nginx_dir, case, seconds):
    stream = f"w7-{case}"
    url = f"rtmp://127.0.0.1:{W7_PORT}/live/{stream}"
    link.set(W7_SCHEDULE[0][1])
    # The subscriber waits for the stream (nginx-rtmp holds a player until the publisher comes),
    # printing every packet as it arrives (line-buffered, so its arrival time is the packet's).
    sub_lines, pub_lines = [], []
    sub = subprocess.Popen(link.ns(["stdbuf", "-oL", "ffprobe", "-v", "error", "-fflags", "nobuffer", "-analyzeduration", "500000",
                                    "-probesize", "200000", "-rw_timeout", "30000000", "-i", url, "-show_entries",
                                    "packet=codec_type,pts_time,size", "-of", "csv=p=0"]),
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    threading.Thread(target=w7_lines, args=(sub, sub_lines), daemon=True).start()
    time.sleep(1)
    start = time.monotonic()
    pub = subprocess.Popen(link.ns(w7_publisher(case, url, seconds)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    threading.Thread(target=w7_lines, args=(pub, pub_lines), daemon=True).start()
    changes, t = [], 0
    for length, megabits in W7_SCHEDULE:
        if t > 0:
            link.set(megabits)
            changes.append((time.monotonic() - start, megabits))
        t += length
        while time.monotonic() - start < t and pub.poll() is None:
            time.sleep(0.05)
    try:
        pub.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pub.kill()
        pub.wait()
    err = pub.stderr.read()
    time.sleep(2)
    sub.terminate()
    sub.wait()
    return start, changes, pub.returncode, err, pub_lines, sub_lines


def w7_figures(case, seconds, start, changes, code, err, pub_lines, sub_lines, recording):
    cut_at, clear_at = changes[0][0], changes[1][0]
    video = []
    for at, line in sub_lines:
        parts = line.strip().split(",")
        if len(parts) >= 3 and parts[0] == "video":
            try:
                video.append((at - start, float(parts[1]), int(parts[2])))
            except ValueError:
                pass
    # Delay behind the source: arrival less media time, over the least seen while the link was
    # wide (source to subscriber on an idle link: encoding and one loopback hop, a few ms).
    lags = [(pts, at - pts) for at, pts, _ in video]
    steady = [lag for pts, lag in lags if 5 <= pts < cut_at] or [lag for _, lag in lags]
    base = min(steady) if steady else 0
    def q(values):
        values = sorted(values)
        if not values:
            return None
        pick = lambda p: values[min(len(values) - 1, int(p * len(values)))]
        return {"p50": round(pick(0.5), 3), "p99": round(pick(0.99), 3), "max": round(values[-1], 3)}
    during = [lag - base for pts, lag in lags if cut_at <= pts < clear_at + 5]
    overall = [lag - base for _, lag in lags]
    # Received video bit/s per second of arrival: when it is back to 90 % of the ceiling after the clear.
    per_second = {}
    for at, _, size in video:
        per_second[int(at)] = per_second.get(int(at), 0) + size * 8
    back_received = next((s + 1 - clear_at for s in sorted(per_second) if s >= clear_at and per_second[s] >= 0.9 * W7_CEILING), None)
    events_ = []
    for at, line in pub_lines:
        if line.startswith("{"):
            try:
                e = json.loads(line)
                e["arrived"] = at - start
                events_.append(e)
            except ValueError:
                pass
    bitrate = [e for e in events_ if e.get("event") == "bitrate"]
    back_target = next((e["arrived"] - clear_at for e in bitrate if e["arrived"] > clear_at and e["to"] >= 0.9 * W7_CEILING), None)
    disconnects = sum(1 for e in events_ if e.get("event") == "disconnected")
    if case == "ffmpeg" and code != 0:
        disconnects += 1      # ffmpeg does not reconnect: a broken connection ends it
    decode = subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-i", recording, "-f", "null", "-"], capture_output=True, text=True) \
        if recording else None
    expected = seconds * RATE
    entry = {"exit": code, "disconnects": disconnects, "pictures_received": len(video), "pictures_expected": expected,
             "pictures_lost": max(0, expected - len(video)), "delay_during_cut_s": q(during), "delay_s": q(overall),
             "back_to_90pct_target_s": None if back_target is None else round(back_target, 1),
             "back_to_90pct_received_s": None if back_received is None else round(back_received, 1),
             "received_kbit_per_s": [round(per_second.get(s, 0) / 1000) for s in range(seconds + 2)],
             "bitrate_changes": [(round(e["arrived"], 1), e["to"]) for e in bitrate],
             "decode_errors": None if decode is None else len([l for l in decode.stderr.splitlines() if l.strip()]),
             "lowest_target": min((e["to"] for e in bitrate), default=None), "stderr": err[-400:]}
    return entry


def w7(seconds_scale=1.0):
    """avgraph adaptive, avgraph fixed and ffmpeg fixed, one after the other, each publishing the
    same noise at 4 Mbit/s through the same shaped uplink (5 -> 1.5 -> 5 Mbit/s) to nginx-rtmp,
    watched by an ffprobe subscriber reading it back."""
    if os.geteuid() != 0 or not os.access(TC, os.X_OK):
        raise SystemExit("W7 needs root, ip and tc (network namespaces)")
    w7_inputs()
    seconds = sum(s for s, _ in W7_SCHEDULE)
    link = ShapedLink(W7_SCHEDULE[0][1], W7_PORT)
    nginx_dir = tempfile.mkdtemp(prefix="bench-w7-nginx-")
    recordings = os.path.join(nginx_dir, "recordings")
    os.makedirs(recordings)
    os.chmod(recordings, 0o777)
    with open(os.path.join(nginx_dir, "nginx.conf"), "w") as f:
        f.write(f"""load_module {NginxRtmp.MODULE};
daemon off;
master_process off;
worker_processes 1;
pid {nginx_dir}/nginx.pid;
error_log {nginx_dir}/error.log info;
events {{ worker_connections 64; }}
rtmp {{ server {{ listen 127.0.0.1:{W7_PORT};
    application live {{ live on; record all; record_path {recordings}; record_unique on; }} }} }}
""")
    nginx = subprocess.Popen(link.ns(["/usr/sbin/nginx", "-p", nginx_dir, "-c", os.path.join(nginx_dir, "nginx.conf"),
                                      "-e", os.path.join(nginx_dir, "error.log")]),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cases = {}
    try:
        end = time.monotonic() + 10
        while subprocess.run(link.ns(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{W7_PORT}"]),
                             stderr=subprocess.DEVNULL).returncode != 0:
            if time.monotonic() > end:
                raise SystemExit("W7: nginx did not start in the namespace")
            time.sleep(0.1)
        # AVGRAPH_W7_CASES=adaptive: one case alone, while tuning (docs/PERFORMANCE.md's figures are all three).
        for case in os.environ.get("AVGRAPH_W7_CASES", "adaptive,fixed,ffmpeg").split(","):
            log(f"  W7 {case}: {seconds} s through 5 -> 1.5 -> 5 Mbit/s")
            before = set(os.listdir(recordings))
            start, changes, code, err, pub_lines, sub_lines = w7_run(link, nginx_dir, case, seconds)
            time.sleep(1)
            new = sorted(set(os.listdir(recordings)) - before)
            recording = os.path.join(recordings, new[-1]) if new else None
            e = w7_figures(case, seconds, start, changes, code, err, pub_lines, sub_lines, recording)
            e["load"] = os.getloadavg()[0]
            cases[case] = e
            if code != 0 and case != "ffmpeg":
                failures.append(f"W7 {case}: avgraph exited {code}: {err[-300:]}")
            log(f"  W7 {case}: delay during the cut p50/p99/max {e['delay_during_cut_s']} s, overall {e['delay_s']}; "
                f"disconnects {e['disconnects']}; pictures lost {e['pictures_lost']} of {e['pictures_expected']}; "
                f"decode errors {e['decode_errors']}; back to 90 % (target) {e['back_to_90pct_target_s']} s, "
                f"(received) {e['back_to_90pct_received_s']} s; lowest {e['lowest_target']}; load {e['load']:.1f}")
            log(f"     received kbit/s: {e['received_kbit_per_s']}")
    finally:
        nginx.terminate()
        nginx.wait()
        link.remove()
        shutil.rmtree(nginx_dir, ignore_errors=True)
    return {"schedule": W7_SCHEDULE, "ceiling": W7_CEILING, "floor": W7_FLOOR, "cases": cases}
