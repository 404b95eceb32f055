import Foundation

/// A phone app's RTMP publisher written in the test from the published specifications (RTMP 1.0,
/// FLV 10.1, Veovera's Enhanced RTMP v2), in Python's standard library alone: nothing of
/// avgraph's or FFmpeg's RTMP code is in it. It publishes elementary streams made by ffmpeg
/// (H.264 or HEVC Annex B, AV1 in IVF, AAC in ADTS) in real time and measures how long each
/// window of bytes it asked to be acknowledged waits for its Acknowledgement.
///
/// `python3 publisher.py URL --video FILE --codec avc1|hvc1|av01|hevc12 --audio FILE.aac
/// [--window BYTES] [--multitrack] [--aac-priming SAMPLES] [--audio-format N] [--privacy ON_MS:FOR_MS]...
/// [--sent FILE]` prints one JSON object: the server's connect answer, the
/// acknowledgement delays (ms) and their p50/p99, the pictures and sequence headers sent.
/// `--privacy`: the app's in-band privacy switch (an `onPrivacy` data message, on at ON_MS of
/// the pictures' clock, off FOR_MS later); `--sent`: each picture's payload as sent (NAL units
/// behind 4-byte lengths), each behind its own 4-byte length, into FILE.
/// A new SPS (H.264/HEVC) or sequence header (AV1) in the stream is sent as a new sequence
/// start before its keyframe: a phone that turns.
enum ErtmpPublisher {
    /// Runs the publisher (written into `dir`) to `url`: its exit status and its JSON result.
    static func publish(_ url: String, _ dir: String, _ args: [String]) throws -> (Int32, [String: Any]) {
        let script = dir + "/publisher.py"
        CLI.write(Self.script, to: script)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["python3", script, url] + args
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let result = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? ["stderr": errors]
        return (p.terminationStatus, result)
    }

    static let script = #"""
import json, os, random, socket, struct, sys, threading, time

def amf(v):
    if isinstance(v, bool): return b'\x01' + bytes([1 if v else 0])
    if isinstance(v, (int, float)): return b'\x00' + struct.pack('>d', float(v))
    if isinstance(v, str):
        b = v.encode(); return b'\x02' + struct.pack('>H', len(b)) + b
    if v is None: return b'\x05'
    if isinstance(v, list): return b'\x0a' + struct.pack('>I', len(v)) + b''.join(amf(x) for x in v)
    if isinstance(v, dict):
        out = b'\x03'
        for k, x in v.items():
            kb = k.encode(); out += struct.pack('>H', len(kb)) + kb + amf(x)
        return out + b'\x00\x00\x09'
    raise TypeError(v)

def amf_read(b, i):
    t = b[i]; i += 1
    if t == 0: return struct.unpack('>d', b[i:i+8])[0], i + 8
    if t == 1: return b[i] != 0, i + 1
    if t == 2:
        n = struct.unpack('>H', b[i:i+2])[0]; return b[i+2:i+2+n].decode(), i + 2 + n
    if t in (3, 8):
        if t == 8: i += 4
        o = {}
        while True:
            n = struct.unpack('>H', b[i:i+2])[0]; i += 2
            if n == 0 and b[i] == 9: return o, i + 1
            k = b[i:i+n].decode(); i += n
            o[k], i = amf_read(b, i)
    if t == 10:
        n = struct.unpack('>I', b[i:i+4])[0]; i += 4; out = []
        for _ in range(n):
            x, i = amf_read(b, i); out.append(x)
        return out, i
    if t in (5, 6): return None, i
    raise ValueError('amf type %d' % t)

def amf_all(b):
    out, i = [], 0
    while i < len(b):
        v, i = amf_read(b, i); out.append(v)
    return out

class Conn:
    def __init__(self, host, port, window):
        self.s = socket.create_connection((host, port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.chunk = 128
        self.sent = 0            # bytes after the handshake, as the server counts them
        self.marks = []          # (byte offset after a send, time it returned)
        self.acks = []           # (value, arrival time)
        self.messages = []
        self.cv = threading.Condition()
        self.window = window
        c1 = struct.pack('>II', 0, 0) + bytes(random.getrandbits(8) for _ in range(1528))
        self.s.sendall(b'\x03' + c1)
        s0s1s2 = self.recv_exact(1 + 1536 + 1536)
        self.s.sendall(s0s1s2[1:1537])
        self.inbuf = b''
        threading.Thread(target=self.reader, daemon=True).start()

    def recv_exact(self, n):
        b = b''
        while len(b) < n:
            x = self.s.recv(n - len(b))
            if not x: raise EOFError('server closed during the handshake')
            b += x
        return b

    def send_message(self, csid, mtype, stream, ts, payload):
        ts &= 0xffffffff
        ext = ts >= 0xffffff
        head = bytes([csid]) + (b'\xff\xff\xff' if ext else ts.to_bytes(3, 'big')) + len(payload).to_bytes(3, 'big') + bytes([mtype]) + struct.pack('<I', stream)
        if ext: head += struct.pack('>I', ts)
        out = bytearray(head)
        for k in range(0, max(len(payload), 1), self.chunk):
            if k: out += bytes([0xc0 | csid]) + (struct.pack('>I', ts) if ext else b'')
            out += payload[k:k + self.chunk]
        # The time the send began: on loopback the ack can arrive before sendall returns to Python.
        began = time.monotonic()
        self.s.sendall(out)
        self.sent += len(out)
        self.marks.append((self.sent, began))

    def reader(self):
        streams = {}
        chunk = 128
        buf = b''
        def need(n):
            nonlocal buf
            while len(buf) < n:
                x = self.s.recv(65536)
                if not x: raise EOFError
                buf += x
        try:
            while True:
                need(1); fmt = buf[0] >> 6; csid = buf[0] & 0x3f; p = 1
                if csid == 0: need(2); csid = 64 + buf[1]; p = 2
                elif csid == 1: need(3); csid = 64 + buf[1] + 256 * buf[2]; p = 3
                st = streams.setdefault(csid, {'ts': 0, 'len': 0, 'type': 0, 'sid': 0, 'delta': 0, 'part': b''})
                hl = [11, 7, 3, 0][fmt]; need(p + hl)
                h = buf[p:p + hl]; p += hl
                if fmt <= 2: t = int.from_bytes(h[0:3], 'big')
                if fmt <= 1: st['len'] = int.from_bytes(h[3:6], 'big'); st['type'] = h[6]
                if fmt == 0: st['sid'] = struct.unpack('<I', h[7:11])[0]
                if fmt <= 2 and t == 0xffffff: need(p + 4); t = struct.unpack('>I', buf[p:p+4])[0]; p += 4
                if fmt == 0: st['ts'] = t
                elif fmt <= 2: st['delta'] = t; st['ts'] += t
                n = min(chunk, st['len'] - len(st['part'])); need(p + n)
                st['part'] += buf[p:p + n]; buf = buf[p + n:]
                if len(st['part']) == st['len']:
                    body, st['part'] = st['part'], b''
                    now = time.monotonic()
                    if st['type'] == 1: chunk = struct.unpack('>I', body[:4])[0] & 0x7fffffff
                    elif st['type'] == 3:
                        with self.cv: self.acks.append((struct.unpack('>I', body[:4])[0], now)); self.cv.notify_all()
                    elif st['type'] == 20:
                        with self.cv: self.messages.append(amf_all(body)); self.cv.notify_all()
        except Exception:
            with self.cv: self.messages.append(['closed']); self.cv.notify_all()

    def command(self, values, stream=0):
        self.send_message(3 if stream == 0 else 5, 20, stream, 0, b''.join(amf(v) for v in values))

    def wait_for(self, pred, timeout=10):
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                for m in self.messages:
                    if pred(m): return m
                left = end - time.monotonic()
                if left <= 0: raise TimeoutError('no answer from the server: %r' % self.messages)
                self.cv.wait(left)

def nal_units(data):
    # Annex B start codes.
    i, starts = 0, []
    while True:
        j = data.find(b'\x00\x00\x01', i)
        if j < 0: break
        starts.append(j + 3); i = j + 3
    out = []
    for k, s in enumerate(starts):
        e = starts[k + 1] - 3 if k + 1 < len(starts) else len(data)
        while e > s and data[e - 1] == 0: e -= 1
        out.append(data[s:e])
    return out

def access_units(path, hevc):
    aus, cur, has_vcl = [], [], False
    aud = 35 if hevc else 9
    for n in nal_units(open(path, 'rb').read()):
        t = (n[0] >> 1) & 0x3f if hevc else n[0] & 0x1f
        vcl = t < 32 if hevc else 1 <= t <= 5
        first_slice = vcl and ((n[2] & 0x80) if hevc else (n[1] & 0x80))
        if (t == aud or t in ((32, 33, 34, 39) if hevc else (6, 7, 8)) or first_slice) and has_vcl:
            aus.append(cur); cur = []; has_vcl = False
        if t == aud: continue
        cur.append(n); has_vcl = has_vcl or vcl
    if cur: aus.append(cur)
    return aus

def unescape(b):
    return b.replace(b'\x00\x00\x03', b'\x00\x00')

def avcc(sps, pps):
    return bytes([1, sps[1], sps[2], sps[3], 0xff, 0xe1]) + struct.pack('>H', len(sps)) + sps + b'\x01' + struct.pack('>H', len(pps)) + pps

def hvcc(vps, sps, pps):
    # HEVCDecoderConfigurationRecord: the general profile fields copied from the SPS's profile_tier_level.
    ptl = unescape(sps[2:])[1:13]
    rec = bytes([1]) + ptl[0:1] + ptl[1:5] + ptl[5:11] + ptl[11:12]
    rec += bytes([0xf0, 0x00, 0xfc, 0xfd, 0xf8, 0xf8, 0x00, 0x00, 0x0f])  # spatial seg, parallelism, chroma, depths, frame rate, lengthSize 4
    rec += bytes([3])
    for t, n in ((32, vps), (33, sps), (34, pps)):
        rec += bytes([0x80 | t]) + struct.pack('>H', 1) + struct.pack('>H', len(n)) + n
    return rec

def obus(data):
    i, out = 0, []
    while i < len(data):
        h = data[i]; j = i + 1 + (1 if h & 4 else 0)
        size, k = 0, 0
        while True:
            b = data[j]; j += 1; size |= (b & 0x7f) << (7 * k); k += 1
            if not b & 0x80: break
        out.append(((h >> 3) & 0xf, data[i:j + size]))
        i = j + size
    return out

def ivf_frames(path):
    d = open(path, 'rb').read()
    hl = struct.unpack('<H', d[6:8])[0]
    i, out = hl, []
    while i + 12 <= len(d):
        n = struct.unpack('<I', d[i:i+4])[0]; out.append(d[i + 12:i + 12 + n]); i += 12 + n
    return out

def adts_frames(path):
    d = open(path, 'rb').read(); i, out, asc, rate = 0, [], None, 48000
    rates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350]
    while i + 7 <= len(d):
        prof = (d[i+2] >> 6) + 1; fi = (d[i+2] >> 2) & 0xf; ch = ((d[i+2] & 1) << 2) | (d[i+3] >> 6)
        n = ((d[i+3] & 3) << 11) | (d[i+4] << 3) | (d[i+5] >> 5)
        hl = 7 if d[i+1] & 1 else 9
        if asc is None:
            asc = bytes([(prof << 3) | (fi >> 1), ((fi & 1) << 7) | (ch << 3)]); rate = rates[fi]
        out.append(d[i + hl:i + n]); i += n
    return asc, rate, out

def main():
    a = sys.argv[1:]
    url = a[0]
    opt = {a[k]: a[k + 1] for k in range(1, len(a) - 1) if a[k].startswith('--') and not a[k + 1].startswith('--')}
    flags = set(x for x in a if x.startswith('--'))
    codec = opt.get('--codec', 'avc1'); window = int(opt.get('--window', '100000')); fps = float(opt.get('--fps', '30'))
    rest = url[len('rtmp://'):]; hostport, app, key = rest.split('/', 2)
    host, port = hostport.rsplit(':', 1)
    c = Conn(host, int(port), window)
    c.send_message(2, 1, 0, 0, struct.pack('>I', 4096)); c.chunk = 4096
    c.send_message(2, 5, 0, 0, struct.pack('>I', window))
    video_list = ['avc1', 'hvc1', 'av01']
    c.command(['connect', 1, {'app': app, 'type': 'nonprivate', 'flashVer': 'FMLE/3.0 (compatible; ertmp-test)', 'tcUrl': 'rtmp://%s/%s' % (hostport, app),
               'fourCcList': video_list + ['mp4a'], 'videoFourCcInfoMap': {x: 1 for x in video_list}, 'capsEx': 2}])
    res = c.wait_for(lambda m: m[0] in ('_result', '_error') and m[1] == 1)
    if res[0] != '_result': print(json.dumps({'error': res})); sys.exit(2)
    props = res[2] if len(res) > 2 and isinstance(res[2], dict) else {}
    c.command(['releaseStream', 2, None, key]); c.command(['FCPublish', 3, None, key]); c.command(['createStream', 4, None])
    sid = int(c.wait_for(lambda m: m[0] == '_result' and m[1] == 4)[3])
    c.command(['publish', 5, None, key, 'live'], stream=sid)
    st = c.wait_for(lambda m: m[0] == 'onStatus' and len(m) > 3)
    if st[3].get('code') != 'NetStream.Publish.Start': print(json.dumps({'error': st})); sys.exit(3)

    events = []   # (ms, order, kind, payload)
    hevc = codec in ('hvc1', 'hevc12')
    headers_sent = 0
    sent = open(opt['--sent'], 'wb') if '--sent' in opt else None
    for spec in [a[k + 1] for k in range(len(a) - 1) if a[k] == '--privacy']:
        on, span = (int(x) for x in spec.split(':'))
        for ms, state in ((on, True), (on + span, False)):
            events.append((ms, 0, 18, amf('onPrivacy') + amf({'on': state})))
    def ex_video(packet_type, frame_type, body):
        if '--multitrack' in flags:
            # ManyTracks of one codec: track 0 and a copy as track 1 (a second rendition).
            head = bytes([0x80 | (frame_type << 4) | 6, (1 << 4) | packet_type]) + codec.encode()
            return head + b''.join(bytes([t]) + len(body).to_bytes(3, 'big') + body for t in (0, 1))
        return bytes([0x80 | (frame_type << 4) | packet_type]) + codec.encode() + body
    if codec in ('avc1', 'hvc1', 'hevc12'):
        aus = access_units(opt['--video'], hevc)
        params = {}
        for n_, au in enumerate(aus):
            ts = int(round(n_ * 1000 / fps))
            kinds = [((n[0] >> 1) & 0x3f if hevc else n[0] & 0x1f) for n in au]
            for n, t in zip(au, kinds):
                if t in ((32, 33, 34) if hevc else (7, 8)): params[t] = n
            is_key = any(t in (19, 20, 21) for t in kinds) if hevc else 5 in kinds
            if is_key:
                rec = hvcc(params[32], params[33], params[34]) if hevc else avcc(params[7], params[8])
                if rec != params.get('rec'):
                    params['rec'] = rec; headers_sent += 1
                    if codec == 'hvc1': body = ex_video(0, 1, rec)
                    else: body = bytes([0x17 if codec == 'avc1' else 0x1c, 0, 0, 0, 0]) + rec
                    events.append((ts, 0, 9, body))
            data = b''.join(struct.pack('>I', len(n)) + n for n, t in zip(au, kinds) if t not in ((32, 33, 34) if hevc else (7, 8, 9)))
            ft = 1 if is_key else 2
            if codec == 'hvc1':
                # CodedFramesX (no composition time) for keyframes, CodedFrames with a zero one otherwise: both forms.
                body = ex_video(3, ft, data) if is_key else ex_video(1, ft, b'\x00\x00\x00' + data)
            else:
                body = bytes([(ft << 4) | (7 if codec == 'avc1' else 12), 1, 0, 0, 0]) + data
            events.append((ts, 1, 9, body))
            if sent is not None: sent.write(struct.pack('>I', len(data)) + data)
    elif codec == 'av01':
        seq = None
        for n_, tu in enumerate(ivf_frames(opt['--video'])):
            ts = int(round(n_ * 1000 / fps))
            units = obus(tu)
            for t, o in units:
                if t == 1 and o != seq:
                    seq = o; headers_sent += 1
                    # AV1CodecConfigurationRecord: marker/version, profile and level from the header, 4:2:0 8-bit.
                    hdr = o[1 + (1 if o[0] & 4 else 0):]
                    k = 0
                    while hdr[k] & 0x80: k += 1
                    profile = hdr[k + 1] >> 5
                    # (seq_level_idx is not read: decoders take the sequence header OBU that follows.)
                    events.append((ts, 0, 9, ex_video(0, 1, bytes([0x81, profile << 5, 0x0c, 0]) + o)))
            is_key = any(t == 1 for t, _ in units)
            data = b''.join(o for t, o in units if t != 2)   # temporal delimiters dropped, as in MP4
            events.append((ts, 1, 9, ex_video(1, 1 if is_key else 2, data)))
    if '--audio' in opt:
        asc, rate, frames = adts_frames(opt['--audio'])
        # ffmpeg's AAC encoder starts with 1024 samples of priming (an MP4's edit list says so;
        # ADTS cannot): the first frame's sound starts that far in, so the pictures are stamped
        # that much later, as ffmpeg's flv muxer does.
        priming = round(int(opt.get('--aac-priming', '1024')) * 1000 / rate)
        events = [(ts + priming if kind in (9, 18) else ts, order, kind, body) for ts, order, kind, body in events]
        # --audio-format N: the audio tags say sound format N instead of AAC's 10 (a codec the server may not take).
        first = bytes([(int(opt.get('--audio-format', '10')) << 4) | 0x0f])
        events.append((0, 0, 8, first + b'\x00' + asc))
        for n_, f in enumerate(frames):
            events.append((int(round(n_ * 1024 * 1000 / rate)), 1, 8, first + b'\x01' + f))
    if sent is not None: sent.close()
    events.sort(key=lambda e: (e[0], e[1]))
    meta = {'duration': 0, 'width': 720, 'height': 1280, 'framerate': fps,
            'videocodecid': {'avc1': 7, 'hevc12': 12}.get(codec, codec), 'audiocodecid': 10, 'encoder': 'ertmp-test'}
    c.send_message(4, 18, sid, 0, amf('@setDataFrame') + amf('onMetaData') + amf(meta))
    start = time.monotonic()
    pictures = 0
    for ts, order, kind, body in events:
        delay = start + ts / 1000 - time.monotonic()
        if delay > 0: time.sleep(delay)
        c.send_message(6 if kind == 9 else 4, kind, sid, ts, body)
        if kind == 9 and order == 1: pictures += 1
    c.command(['FCUnpublish', 6, None, key]); c.command(['deleteStream', 7, None, sid])
    time.sleep(0.3)
    c.s.close()
    # Each window the server was asked to acknowledge: from the send that carried its last byte to the first ack covering it.
    delays = []
    k = 1
    for value, arrived in c.acks:
        while k * window <= value:
            sent_at = next((t for off, t in c.marks if off >= k * window), None)
            if sent_at is not None: delays.append((arrived - sent_at) * 1000)
            k += 1
    ds = sorted(delays)
    pick = lambda q: ds[min(len(ds) - 1, int(q * len(ds)))] if ds else None
    print(json.dumps({'server': props, 'acks': len(c.acks), 'windows': k - 1, 'bytes': c.sent, 'p50': pick(0.5), 'p99': pick(0.99),
                      'max': ds[-1] if ds else None, 'pictures': pictures, 'headers': headers_sent}))

main()
"""#
}
