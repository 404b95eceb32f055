"""nginx-rtmp on loopback for bench/run's P1 (and its module path for W7's own, in a namespace)."""
import os
import shutil
import subprocess
import time


class NginxRtmp:
    """nginx with libnginx-mod-rtmp on a free loopback port, recording every publish session
    to its own .flv (the configuration of Tests/EndToEndTests/NginxRtmp.swift)."""
    MODULE = "/usr/lib/nginx/modules/ngx_rtmp_module.so"

    def __init__(self):
        import socket
        import tempfile
        if not (os.access("/usr/sbin/nginx", os.X_OK) and os.path.exists(self.MODULE)):
            raise SystemExit("P1 needs nginx and libnginx-mod-rtmp (scripts/setup installs them)")
        self.dir = tempfile.mkdtemp(prefix="bench-nginx-")
        self.recordings = os.path.join(self.dir, "recordings")
        os.makedirs(self.recordings)
        os.chmod(self.recordings, 0o777)      # nginx's worker may run as nobody
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        with open(os.path.join(self.dir, "nginx.conf"), "w") as f:
            f.write(f"""load_module {self.MODULE};
daemon off;
master_process off;
worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log info;
events {{ worker_connections 64; }}
rtmp {{ server {{ listen 127.0.0.1:{self.port};
    application live {{ live on; record all; record_path {self.recordings}; record_unique on; }} }} }}
""")
        self.process = subprocess.Popen(["/usr/sbin/nginx", "-p", self.dir, "-c", os.path.join(self.dir, "nginx.conf"),
                                         "-e", os.path.join(self.dir, "error.log")],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        end = time.monotonic() + 10
        while time.monotonic() < end:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise SystemExit(f"nginx did not start on 127.0.0.1:{self.port}")

    def url(self, stream):
        return f"rtmp://127.0.0.1:{self.port}/live/{stream}"

    def sessions(self):
        return [os.path.join(self.recordings, n) for n in os.listdir(self.recordings) if n.endswith(".flv")]

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
