"""bench/run's common ground: its paths and constants, its errors and log,
children pinned to the bench's cores and stopped by PID, their CPU time,
and one stokerd (Daemon)."""
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time


BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH_DIR)
CLK_TCK = os.sysconf("SC_CLK_TCK")
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
DATA_FORMAT = 1               # Bump when the generated data changes meaning.


class BenchError(Exception):
    """A system failed or produced numbers that make no sense."""


class SetupError(Exception):
    """Missing binaries, bad flags: exit 2."""


_T0 = time.perf_counter()


def log(msg):
    print(f"[{time.perf_counter() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def _child_setup(cpus):
    """preexec_fn: pin to the benchmark's CPUs and die with this process."""
    def setup():
        if cpus:
            os.sched_setaffinity(0, cpus)
        try:  # PR_SET_PDEATHSIG = 1: SIGTERM the child if bench/run dies.
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
        except Exception:  # noqa: BLE001 - best effort, Linux only.
            pass
    return setup


def _kill_group(proc):
    """SIGKILLs the process group of a child started with start_new_session."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def system_busy_seconds():
    """CPU seconds all processes of the machine have used (from /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
    except OSError:
        return None
    vals = [int(x) for x in fields]
    # user nice system idle iowait irq softirq steal ...
    busy = vals[0] + vals[1] + vals[2] + vals[5] + vals[6] + (vals[7] if len(vals) > 7 else 0)
    return busy / CLK_TCK


def run_child(cmd, timeout, cpus, what):
    """Runs cmd to the end; returns (stdout, stderr, wall_s, cpu_s, busy_s)."""
    busy0 = system_busy_seconds()
    cpu0 = children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True,
                            preexec_fn=_child_setup(cpus))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise BenchError(f"{what}: still running after {timeout} s; killed")
    except BaseException:
        _kill_group(proc)
        raise
    wall = time.perf_counter() - t0
    cpu = children_cpu() - cpu0
    busy1 = system_busy_seconds()
    if proc.returncode != 0:
        raise BenchError(f"{what}: exit status {proc.returncode}\n"
                         f"  command: {' '.join(cmd)}\n  stderr: {err.strip()[-2000:]}")
    busy = busy1 - busy0 if busy0 is not None and busy1 is not None else None
    return out, err, wall, cpu, busy


def last_json_line(text, what):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                break
    raise BenchError(f"{what}: no JSON result in its output:\n{text[-2000:]}")


class Daemon:
    """A stokerd process: started with a config, stopped by PID."""

    def __init__(self, binary, config, log_path, cpus):
        self.binary, self.config, self.log_path, self.cpus = binary, config, log_path, cpus
        self.proc = None
        self._log = None
        self.exit_status = None

    def start(self, socket_path, timeout=20):
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen([self.binary, "--config", self.config],
                                     stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=_child_setup(self.cpus))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"stokerd exited with status {self.proc.returncode} "
                                 f"before listening:\n{self.read_log()}")
            if os.path.exists(socket_path):
                return
            time.sleep(0.02)
        raise BenchError(f"stokerd did not create {socket_path} in {timeout} s:\n"
                         f"{self.read_log()}")

    def read_log(self):
        try:
            with open(self.log_path) as f:
                return f.read()[-4000:]
        except OSError:
            return "(no log)"

    def _proc_file(self, name):
        with open(f"/proc/{self.proc.pid}/{name}") as f:
            return f.read()

    def cpu_seconds(self):
        fields = self._proc_file("stat").rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime

    def thread_cpu(self):
        """CPU seconds per thread name (threads alive now)."""
        out = {}
        task_dir = f"/proc/{self.proc.pid}/task"
        for tid in os.listdir(task_dir):
            try:
                with open(f"{task_dir}/{tid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat.rsplit(")", 1)[1].split()
            key = (name, tid)
            out[key] = (int(fields[11]) + int(fields[12])) / CLK_TCK
        return out

    def status_kib(self, key):
        for line in self._proc_file("status").splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        return None

    def stop(self, timeout=10):
        """SIGTERM, then SIGKILL after timeout seconds; idempotent."""
        try:
            if self.proc is None:
                return
            if self.proc.poll() is not None:
                self.exit_status = self.proc.returncode
                return
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.exit_status = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log(f"stokerd (pid {self.proc.pid}) ignored SIGTERM for {timeout} s; killing it")
                self.proc.kill()
                self.proc.wait()
                self.exit_status = "killed"
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None


def ratio(a, b):
    return a / b if a and b else None
