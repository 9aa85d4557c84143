"""bench/helpers' daemons: the node and helper stokerds, each pinned to its
core and stopped by PID, their configs and metrics, and the throttled
network namespace (Netns)."""
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request



BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ROOT = os.path.dirname(BENCH_DIR)
MEAN, STD = "[0.485, 0.456, 0.406]", "[0.229, 0.224, 0.225]"
# name: (helpers, goal as a multiple of the node alone).
CONFIGURATIONS = {"alone": (0, None), "helpers1": (1, 1.8),
                  "helpers2": (2, 2.7)}


class BenchError(Exception):
    """A stream failed or a daemon misbehaved: exit 1."""


class SetupError(Exception):
    """Missing binaries, a bad flag: exit 2."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def config_text(sock, ds_dir, tcp=False, helpers=None):
    """A daemon's YAML: one worker, metrics on loopback port 0, and for a
    node the `helpers:` map (`helpers`: key -> YAML value, in order)."""
    listen = f"{{unix: {sock}" + (", tcp: '127.0.0.1:0'" if tcp else "") + "}"
    text = f"""# Written by bench/helpers.
listen: {listen}
workers: 1
memory_budget: 4GiB
metrics: {{listen: '127.0.0.1:0'}}
datasets:
  bench: {{path: {ds_dir}}}
pipelines:
  train:
    - decode_jpeg
    - random_resized_crop: {{size: 224}}
    - random_flip
    - normalize: {{mean: {MEAN}, std: {STD}, dtype: float32}}
    - layout: chw
"""
    if helpers:
        text += "helpers: {" + ", ".join(
            f"{k}: {v}" for k, v in helpers.items()) + "}\n"
    return text


def _die_with_parent():
    """preexec_fn: SIGTERM the child if the bench dies without cleaning up
    (PR_SET_PDEATHSIG; kept across the exec of `ip netns exec` and taskset)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort, Linux only.
        pass


def cpu_seconds(pid):
    """User + system CPU seconds process `pid` has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parse_metrics(text):
    """Prometheus text -> {(name, ((label, value), ...)): value}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)$", line)
        if not m or line.startswith("#"):
            continue
        labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"',
                                         m.group(2) or "")))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


class Netns:
    """A network namespace of the bench's own; its loopback may be
    throttled. Processes started in it reach each other over its lo; the
    consumer outside still reaches the node over its unix socket (a path in
    the file system, which namespaces do not split)."""

    def __init__(self, name):
        self.name = name
        self.throttled = None

    @staticmethod
    def create():
        """Returns (Netns, None) or (None, why it cannot be had)."""
        if os.geteuid() != 0:
            return None, "not root (ip netns and tc need CAP_NET_ADMIN)"
        for tool in ("ip", "tc"):
            if shutil.which(tool) is None:
                return None, f"`{tool}` not found"
        ns = Netns(f"stoker-bench-{os.getpid()}")
        try:
            _run(["ip", "netns", "add", ns.name])
        except SetupError as e:
            return None, str(e)
        try:
            ns.exec(["ip", "link", "set", "lo", "up"])
        except SetupError as e:
            ns.delete()
            return None, str(e)
        return ns, None

    def prefix(self):
        return ["ip", "netns", "exec", self.name]

    def exec(self, cmd):
        return _run(self.prefix() + cmd)

    def throttle(self, rate):
        self.exec(["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate",
                   rate, "burst", "256kb", "latency", "50ms"])
        self.throttled = rate

    def unthrottle(self):
        if self.throttled:
            self.exec(["tc", "qdisc", "del", "dev", "lo", "root"])
            self.throttled = None

    def lo_bytes(self):
        """Bytes sent on the namespace's loopback so far (every packet
        once, headers included)."""
        for line in self.exec(["cat", "/proc/net/dev"]).splitlines():
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[8])  # The first transmit column.
        raise BenchError("no lo in the namespace's /proc/net/dev")

    def delete(self):
        subprocess.run(["ip", "netns", "del", self.name],
                       capture_output=True, check=False)


def _run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise SetupError(f"`{' '.join(cmd)}` failed: "
                         f"{(out.stderr or out.stdout).strip()}")
    return out.stdout


class Daemon:
    """A stokerd pinned to one core, perhaps in a network namespace; stopped
    by PID."""

    def __init__(self, args, name, core, tmp, netns=None):
        self.args, self.name, self.core, self.netns = args, name, core, netns
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        self.sock = os.path.join(self.dir, "s.sock")
        self.log_path = os.path.join(self.dir, "stokerd.log")
        self.proc = self.command = None
        self.tcp_port = self.metrics_port = None
        self.helpers = []  # Addresses, for a node.

    def start(self, tcp=False, helpers=None, helper_options=None):
        """Starts it with `helpers` (daemons) and the rest of the helpers:
        map, and waits until it listens (and a node has probed them all)."""
        options = None
        if helpers:
            self.helpers = [f"127.0.0.1:{h.tcp_port}" for h in helpers]
            options = {"addresses": "[" + ", ".join(
                f"'{a}'" for a in self.helpers) + "]"}
            options.update(helper_options or {})
        config = os.path.join(self.dir, "stoker.yaml")
        with open(config, "w") as f:
            f.write(config_text(self.sock, self.args.ds_dir, tcp, options))
        cmd = ((self.netns.prefix() if self.netns else []) +
               ["taskset", "-c", str(self.core), self.args.stokerd,
                "--config", config])
        with open(self.log_path, "a") as logf:
            self.proc = subprocess.Popen(cmd, stdout=logf, stderr=logf,
                                         preexec_fn=_die_with_parent)
        self.command = " ".join(cmd)
        m = self.wait_for(r"event=listening .*tcp=(\d*)")
        self.tcp_port = int(m.group(1)) if m.group(1) else None
        self.metrics_port = int(self.wait_for(
            r"event=metrics_listening .*port=(\d+)").group(1))
        for a in self.helpers:
            self.wait_for(rf"event=helper_up helper={re.escape(a)}\b")
        return self

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def wait_for(self, pattern, timeout=30):
        """The first match of `pattern` in the log, waiting for it."""
        deadline = time.monotonic() + timeout
        while True:
            m = re.search(pattern, self.log())
            if m:
                return m
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = "\n".join(self.log().splitlines()[-15:])
                raise BenchError(f"{self.name}: no {pattern!r} in its log "
                                 f"({'exited' if self.proc.poll() is not None else 'timed out'}):\n{tail}")
            time.sleep(0.02)

    def helper_events(self):
        """The node's helper_up / helper_down lines, in order."""
        return re.findall(r"event=helper_(?:up|down) .*", self.log())

    def wait_helpers_up(self, timeout=40):
        """Waits until the last word on each of its helpers is helper_up
        (a helper marked down is probed again after 1 s, doubling to 30 s)."""
        deadline = time.monotonic() + timeout
        while True:
            state = {}
            for line in self.helper_events():
                m = re.match(r"event=helper_(up|down) helper=(\S+)", line)
                state[m.group(2)] = m.group(1)
            down = [a for a in self.helpers if state.get(a) != "up"]
            if not down:
                return
            if time.monotonic() > deadline:
                raise BenchError(f"{self.name}: helper(s) {down} not up "
                                 f"after {timeout} s")
            time.sleep(0.05)

    def cpu(self):
        return cpu_seconds(self.proc.pid)

    def scrape(self):
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        if self.netns is None:
            with urllib.request.urlopen(url, timeout=10) as r:
                return parse_metrics(r.read().decode())
        return parse_metrics(self.netns.exec([
            sys.executable, "-c",
            "import sys, urllib.request; sys.stdout.write(urllib.request."
            "urlopen(sys.argv[1], timeout=10).read().decode())", url]))

    def closed_stream(self, job):
        """The fields of the node's stream_close line for `job`."""
        m = self.wait_for(rf"event=stream_close .*job={re.escape(job)} .*",
                          timeout=10)
        return dict(re.findall(r"(\w+)=(\S+)", m.group(0)))

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
