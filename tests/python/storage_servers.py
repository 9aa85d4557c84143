"""Real storage servers for the storage tests, started on loopback and
stopped by PID: nginx (Debian's nginx-light, with WebDAV PUT) for HTTP, and
s3rver (npm, installed by .ci/install-deps into tests/.node) for S3 behind
FaultProxy, which checks every request's SigV4 signature with botocore (the
AWS SDK's signer: s3rver itself accepts any V4 signature) and injects the
faults a test asks for: 503s, cut connections, a corrupt byte, latency, a
bandwidth limit per answer or for all answers together (a link). It also counts the bytes served per object.
"""
import grp
import http.client
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
S3RVER = ROOT / "tests" / ".node" / "node_modules" / ".bin" / "s3rver"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

ACCESS_KEY = "S3RVER"  # The key pair s3rver knows.
SECRET_KEY = "S3RVER"


def wait_for(condition, timeout=30.0, what="condition"):
    """Polls `condition` until it is true or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.02)


def free_port():
    # nginx cannot listen on port 0 and report the port; take one the
    # kernel hands out and give it straight to nginx.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """nginx serving `root` over HTTP, PUT enabled (WebDAV)."""

    def __init__(self, root, workdir):
        self.root = Path(root)
        self.dir = Path(workdir)
        self.proc = None
        self.port = None
        # Workers of an nginx started as root would run as nobody, who
        # cannot read a test's temp folder; run them as ourselves. (nginx
        # ignores the directive when not started as root.)
        self.user = "{} {}".format(pwd.getpwuid(os.geteuid()).pw_name,
                                   grp.getgrgid(os.getegid()).gr_name)

    def start(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        for _ in range(5):
            self.port = free_port()
            conf = self.dir / "nginx.conf"
            conf.write_text(f"""
daemon off;
user {self.user};
worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {self.dir}/body;
  proxy_temp_path {self.dir}/proxy;
  fastcgi_temp_path {self.dir}/fastcgi;
  uwsgi_temp_path {self.dir}/uwsgi;
  scgi_temp_path {self.dir}/scgi;
  server {{
    listen 127.0.0.1:{self.port};
    root {self.root};
    location / {{
      dav_methods PUT;
      create_full_put_path on;
      client_max_body_size 0;
    }}
  }}
}}
""")
            self.proc = subprocess.Popen(
                [NGINX, "-p", str(self.dir), "-c", str(conf)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_for(lambda: self._up() or self.proc.poll() is not None,
                         10, "nginx")
            except TimeoutError:
                pass
            if self.proc.poll() is None and self._up():
                return self
        raise RuntimeError("nginx did not start: " +
                           (self.dir / "error.log").read_text())

    def _up(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), 0.2).close()
            return True
        except OSError:
            return False

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class S3rver:
    """s3rver on a temp folder with bucket `bucket`, on 127.0.0.1, port 0."""

    def __init__(self, workdir, bucket="data"):
        self.dir = Path(workdir)
        self.bucket = bucket
        self.proc = None
        self.port = None

    def start(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = open(self.dir / "s3rver.log", "w+")
        self.proc = subprocess.Popen(
            [str(S3RVER), "-d", str(self.dir / "data"), "-a", "127.0.0.1",
             "-p", "0", "--configure-bucket", self.bucket],
            stdout=self.log, stderr=subprocess.STDOUT)

        def port():
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)",
                          (self.dir / "s3rver.log").read_text())
            if m:
                self.port = int(m.group(1))
            return self.port is not None or self.proc.poll() is not None

        wait_for(port, 30, "s3rver")
        if self.port is None:
            raise RuntimeError("s3rver did not start: " +
                               (self.dir / "s3rver.log").read_text())
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def sigv4_error(method, path, headers, secret):
    """Why the SigV4 signature of a request is wrong, or None if it is
    right, recomputed with botocore's S3 signer from what was received."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = headers.get("authorization", "")
    m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/"
                     r"([^/]+)/aws4_request, ?SignedHeaders=([^,]+), ?"
                     r"Signature=([0-9a-f]{64})", auth)
    if not m:
        return "no AWS4-HMAC-SHA256 Authorization header"
    key, _, region, service, signed, signature = m.groups()
    signed_names = signed.split(";")
    for required in ("host", "x-amz-date", "x-amz-content-sha256"):
        if required not in signed_names:
            return f"{required} is not signed"
    amz_date = headers.get("x-amz-date", "")
    when = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
        tzinfo=timezone.utc)
    if abs((datetime.now(timezone.utc) - when).total_seconds()) > 900:
        return "RequestTimeTooSkewed"
    request = AWSRequest(method=method, url="http://" + headers["host"] + path,
                         headers={h: headers[h] for h in signed_names})
    request.context["timestamp"] = amz_date
    signer = S3SigV4Auth(Credentials(key, secret), service, region)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical),
                                request)
    if expected != signature:
        return "SignatureDoesNotMatch"
    return None


class Faults:
    """What FaultProxy does to the next requests; tests change it freely."""

    def __init__(self):
        self.lock = threading.Lock()
        self.fail_next = 0        # Answer this many requests with 503.
        self.cut_next = 0         # Cut this many answers after half a body.
        self.corrupt = {}         # Object name -> byte offset to flip.
        self.latency = 0.0        # Seconds before each answer.
        self.rate = 0             # Bytes/s per answer; 0: unlimited.
        self.link_rate = 0        # Bytes/s of all answers together; 0: no.
        self.link_free_at = 0.0   # When the shared link is free again.
        self.served = {}          # Object name -> body bytes served.
        self.requests = []        # (method, path) of each request.
        self.answering = 0        # Requests being answered now.

    def pace(self, n):
        """Waits until `n` bytes may cross the shared link (link_rate): the
        answers of all connections together get at most that rate."""
        if not self.link_rate:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.link_free_at)
            self.link_free_at = start + n / self.link_rate
            done = self.link_free_at
        time.sleep(max(0.0, done - now))

    def take(self, name):
        with self.lock:
            v = getattr(self, name)
            if v > 0:
                setattr(self, name, v - 1)
                return True
            return False


class FaultProxy:
    """A threaded HTTP proxy on 127.0.0.1, port 0, in front of `upstream`
    (host, port). With `secret`, every request must carry a valid SigV4
    signature for it (else 403 SignatureDoesNotMatch, as S3 answers)."""

    def __init__(self, upstream_port, secret=None):
        self.faults = Faults()
        # Called with the reason when a signature is refused.
        self.on_refused = None
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # The headers and the body go out in separate writes: with
            # Nagle's algorithm the body waits for the client's delayed ACK
            # (40 ms on Linux), which no object store adds.
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_any(self):
                with proxy.faults.lock:
                    proxy.faults.answering += 1
                try:
                    proxy.handle(self, upstream_port, secret)
                finally:
                    with proxy.faults.lock:
                        proxy.faults.answering -= 1

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_any

            def finish(self):
                super().finish()
                if getattr(self, "upstream", None) is not None:
                    self.upstream.close()

        class Server(ThreadingHTTPServer):
            # socketserver listens with a backlog of 5: a client opening
            # dozens of connections at once has its SYNs dropped and
            # resent a second later, which no object store does.
            request_queue_size = 128

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def handle(self, h, upstream_port, secret):
        f = self.faults
        length = int(h.headers.get("content-length") or 0)
        body = h.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in h.headers.items()}
        path = h.path
        name = urlsplit(path).path.rsplit("/", 1)[-1]
        with f.lock:
            f.requests.append((h.command, path))
        if secret is not None:
            why = sigv4_error(h.command, path, headers, secret)
            if why is not None:
                if self.on_refused:
                    self.on_refused(why)
                return self.reply(h, 403, (
                    "<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch"
                    f"</Code><Message>{why}</Message></Error>").encode())
        if f.take("fail_next"):
            return self.reply(h, 503, b"<Error><Code>SlowDown</Code>"
                              b"<Message>injected</Message></Error>")
        if f.latency:
            time.sleep(f.latency)
        fwd = {k: v for k, v in h.headers.items()
               if k.lower() not in ("connection",)}
        resp, data = self.forward(h, upstream_port, path, body, fwd)
        start = 0
        m = re.match(r"bytes (\d+)-", resp.getheader("content-range") or "")
        if m:
            start = int(m.group(1))
        if name in f.corrupt and resp.status in (200, 206):
            at = f.corrupt[name] - start
            if 0 <= at < len(data):
                data = data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1:]
        h.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("connection", "transfer-encoding",
                                 "content-length"):
                h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if h.command == "HEAD":
            return
        if resp.status in (200, 206) and f.take("cut_next"):
            h.wfile.write(data[:len(data) // 2])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        # Each piece waits for its time on the link before it is sent.
        step = 65536
        for i in range(0, len(data), step):
            piece = data[i:i + step]
            f.pace(len(piece))
            if f.rate:
                time.sleep(len(piece) / f.rate)
            h.wfile.write(piece)
            with f.lock:
                f.served[name] = f.served.get(name, 0) + len(piece)

    @staticmethod
    def forward(h, upstream_port, path, body, headers):
        """The upstream's answer to the request, over one kept-alive
        connection per client connection (a new connection a request costs
        the proxy more CPU than the daemon it serves spends): a kept
        connection the upstream has closed is replaced once."""
        for attempt in (0, 1):
            up = getattr(h, "upstream", None)
            if up is None:
                up = h.upstream = http.client.HTTPConnection(
                    "127.0.0.1", upstream_port, timeout=60)
            try:
                up.request(h.command, path, body=body or None,
                           headers=headers)
                resp = up.getresponse()
                return resp, resp.read()
            except (http.client.HTTPException, OSError):
                up.close()
                h.upstream = None
                if attempt:
                    raise

    def reply(self, h, status, body):
        h.send_response(status)
        h.send_header("Content-Type", "application/xml")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(body)
