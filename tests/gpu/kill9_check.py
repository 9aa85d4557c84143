#!/usr/bin/env python3
"""The kill -9 check of the GPU path: "a trainer killed with kill -9 frees its
ring within a second".

    PYTHONPATH=client/python python3 tests/gpu/kill9_check.py \\
        --address unix:/tmp/stoker/stoker.sock --dataset bench \\
        --pipeline gpu224 [--gpu-uuid GPU-...] \\
        [--metrics-url http://127.0.0.1:9464/metrics]

Run from the repository root on a GPU machine against a running stokerd
(built with CUDA). PYTHONPATH must make `import stoker` work in the child
this starts (client/python: the generated protobuf modules are inside the
package); the script also appends the source tree's client/python to
sys.path. Needs torch with CUDA; nvidia-smi only with --memory-source
nvidia-smi.

Steps, each printed with its figures:
 1. A first child opens a cuda_ipc stream, reads 2 batches and closes it
    cleanly, so that what the daemon keeps on the GPU whatever the streams
    (its CUDA context, made on first use) is in the baseline.
 2. Baseline: the GPU's used memory, once steady (torch.cuda.mem_get_info
    in this process, which is device-wide; or nvidia-smi -i UUID), and
    stoker_cuda_device_bytes for the GPU, which must be 0.
 3. A second child opens Loader(device=cuda:N, transport="cuda_ipc"),
    reads 3 batches, keeps them (the last one's slot stays the child's:
    the Loader releases a batch when the next is asked for), prints
    "ready {json}" and sleeps. The used memory must have risen by at least
    its ring: prefetch slots x the batch's bytes (a lower bound: the daemon
    adds `hold` slots and staging); the gauge must be above 0.
 4. SIGKILL to that child by PID; then every --poll-ms (100) for up to
    --deadline (5) s: the used memory, until it is back within
    --tolerance-mib (64) of the baseline (the child's own CUDA context,
    freed by the driver, included), and the gauge, until it is 0.
 5. A third child opens a stream as in 1: the daemon still serves.

Exit 0 when the memory came back within --limit (1.0) s, the memory had
risen by the ring, every child did what it should and (with
--metrics-url) the gauge went from above 0 back to 0 within the deadline;
1 otherwise. Every child is killed by its PID when the check ends.
"""
import argparse
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import traceback
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_CLIENT = os.path.join(ROOT, "client", "python")
if _CLIENT not in sys.path:
    sys.path.append(_CLIENT)  # After PYTHONPATH: that one wins.

GAUGE = "stoker_cuda_device_bytes"
MIB = 1 << 20


# Pure parts (tests/python/test_gpu_bench_scripts.py).

def normal_uuid(uuid: str) -> str:
    """A GPU UUID without nvidia-smi's "GPU-" and in lower case: torch
    gives it bare, nvidia-smi and stokerd with the prefix."""
    uuid = uuid.strip().lower()
    return uuid[4:] if uuid.startswith("gpu-") else uuid


_SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def gauge_by_gpu(text: str, name: str = GAUGE) -> Dict[str, float]:
    """{gpu label: value} of metric `name` in Prometheus text `text`."""
    out: Dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None or m.group(1) != name:
            continue
        labels = dict(_LABEL.findall(m.group(3) or ""))
        out[labels.get("gpu", "")] = float(m.group(4))
    return out


def gauge_for(values: Dict[str, float], uuid: Optional[str]) -> float:
    """The gauge for GPU `uuid` (None: the sum over every GPU); a GPU the
    daemon does not list has 0 bytes."""
    if uuid is None:
        return sum(values.values())
    want = normal_uuid(uuid)
    return sum(v for gpu, v in values.items() if normal_uuid(gpu) == want)


def wait_until(read: Callable[[], float], done: Callable[[float], bool],
               deadline: float, interval: float,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep
               ) -> Tuple[Optional[float], float, List[Tuple[float, float]]]:
    """Reads every `interval` s until done(value) or `deadline` s have
    passed: (seconds to the first done reading or None, the last value,
    every (seconds, value))."""
    t0 = clock()
    seen: List[Tuple[float, float]] = []
    while True:
        value = read()
        at = clock() - t0
        seen.append((at, value))
        if done(value):
            return at, value, seen
        if at >= deadline:
            return None, value, seen
        sleep(max(0.0, min(interval, deadline - at)))


def say(message: str) -> None:
    print(f"kill9_check: {message}", flush=True)


# The children.

def child(a: argparse.Namespace) -> int:
    """--role warm: a stream opened, 2 batches read, closed, "done".
    --role hold: 3 batches read and kept, "ready", then sleeps until
    killed."""
    import torch

    from stoker.torch import Loader
    device = torch.device("cuda", a.device_index)
    torch.cuda.set_device(device)
    loader = Loader(a.address, a.dataset, a.pipeline, a.batch_size,
                    drop_last=True, transport="cuda_ipc", device=device)
    held: List[Any] = []
    batches = iter(loader)
    for _ in range(2 if a.role == "warm" else 3):
        held.append(next(batches))
    image = held[-1]["image"]
    checksum = float(image.float().sum().item())  # The batch is readable.
    torch.cuda.synchronize()
    stream = loader.stream
    report = {"pid": os.getpid(), "transport": loader.transport,
              "prefetch": stream.info.prefetch if stream else None,
              "batch_bytes": sum(t.element_size() * t.nelement()
                                 for t in held[-1].values()),
              "image_device": str(image.device), "checksum": checksum}
    if a.role == "warm":
        del image, held, batches
        loader.close()
        print("done " + json.dumps(report), flush=True)
        return 0
    print("ready " + json.dumps(report), flush=True)
    while True:
        time.sleep(3600)


def child_command(a: argparse.Namespace, role: str,
                  device_index: int) -> List[str]:
    """This script as a child in `role` (see child())."""
    return [sys.executable, os.path.abspath(__file__), "--role", role,
            "--address", a.address, "--dataset", a.dataset,
            "--pipeline", a.pipeline, "--batch-size", str(a.batch_size),
            "--device-index", str(device_index)]


class Child:
    """A child process that says what it did on stdout, stopped by its
    PID."""

    def __init__(self, cmd: List[str], role: str) -> None:
        # stderr goes to ours: a child's traceback lands in the log.
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
        self.role = role
        self.pending = b""  # Read from stdout, not yet a whole line.

    def line(self, word: str, timeout: float) -> Dict[str, Any]:
        """The JSON after `word` on the child's first such stdout line;
        RuntimeError when it exits or `timeout` s pass first."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        end = time.monotonic() + timeout
        prefix = word.encode() + b" "
        while True:
            while b"\n" in self.pending:
                text, self.pending = self.pending.split(b"\n", 1)
                if text.startswith(prefix):
                    return dict(json.loads(text[len(prefix):]))
            left = end - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"the {self.role} child said no "
                                   f"'{word}' within {timeout:.0f} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                code = self.proc.wait()
                raise RuntimeError(f"the {self.role} child exited with "
                                   f"status {code} before '{word}' (its "
                                   f"stderr is above)")
            self.pending += chunk

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


# The parent.

class Gpu:
    """Reads the used memory of one GPU, device-wide."""

    def __init__(self, a: argparse.Namespace) -> None:
        import torch
        self.torch = torch
        if not torch.cuda.is_available():
            raise SystemExit("kill9_check: torch.cuda.is_available() is "
                             "False: this needs a GPU")
        self.index = 0
        if a.gpu_uuid:
            found = [i for i in range(torch.cuda.device_count())
                     if normal_uuid(str(torch.cuda.get_device_properties(
                         i).uuid)) == normal_uuid(a.gpu_uuid)]
            if not found:
                raise SystemExit(f"kill9_check: torch sees no GPU "
                                 f"{a.gpu_uuid}")
            self.index = found[0]
        props = torch.cuda.get_device_properties(self.index)
        self.uuid = f"GPU-{props.uuid}"
        self.name = props.name
        self.source = a.memory_source
        torch.cuda.mem_get_info(self.index)  # This process's context first.

    def used(self) -> float:
        """Bytes in use on the GPU now, by every process."""
        if self.source == "nvidia-smi":
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=memory.used",
                 "--format=csv,noheader,nounits", "-i", self.uuid],
                capture_output=True, text=True, check=True, timeout=10)
            return float(out.stdout.strip().splitlines()[0]) * MIB
        free, total = self.torch.cuda.mem_get_info(self.index)
        return float(total - free)


def steady(read: Callable[[], float], interval: float, seconds: float,
           within: float) -> float:
    """A reading once three in a row agree within `within` bytes (or the
    last after `seconds`)."""
    last: List[float] = []

    def settled(value: float) -> bool:
        last.append(value)
        return len(last) >= 3 and max(last[-3:]) - min(last[-3:]) <= within
    _, value, _ = wait_until(read, settled, seconds, interval)
    return value


def check(a: argparse.Namespace) -> int:
    failures: List[str] = []
    report: Dict[str, Any] = {}
    gpu = Gpu(a)
    say(f"GPU {gpu.index}: {gpu.name} {gpu.uuid}; used memory from "
        f"{gpu.source}")

    def metric() -> float:
        with urllib.request.urlopen(a.metrics_url, timeout=2) as r:
            return gauge_for(gauge_by_gpu(r.read().decode()), gpu.uuid)

    children: List[Child] = []
    try:
        run(a, gpu, metric, children, report, failures)
    except Exception as e:  # Reported with the check's other failures.
        traceback.print_exc()
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        for c in children:
            c.kill()
    report["failures"] = failures
    if a.out:
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)
    if failures:
        say("FAILED: " + "; ".join(failures))
        return 1
    say("passed")
    return 0


def run(a: argparse.Namespace, gpu: Gpu, metric: Callable[[], float],
        children: List[Child], report: Dict[str, Any],
        failures: List[str]) -> None:
    """Steps 1 to 5 of the module comment; adds to `report` and
    `failures`, and every child it starts to `children`."""
    interval = a.poll_ms / 1000.0
    tolerance = a.tolerance_mib * MIB
    before = gpu.used()
    warm = Child(child_command(a, "warm", gpu.index), "warm")
    children.append(warm)
    warmed = warm.line("done", a.ready_timeout)
    warm.proc.wait(timeout=30)
    say(f"warm-up child: {warmed['transport']} stream opened, "
        f"2 batches of {warmed['batch_bytes'] / MIB:.1f} MiB read, "
        f"closed; exit status {warm.proc.returncode}")
    if warm.proc.returncode != 0:
        failures.append("warm-up child failed")
    baseline = steady(gpu.used, interval, 5.0, 2 * MIB)
    report["used_before_warm_up_mib"] = before / MIB
    report["baseline_mib"] = baseline / MIB
    say(f"baseline: {baseline / MIB:.0f} MiB used ({before / MIB:.0f} "
        f"before the warm-up stream: the daemon keeps "
        f"{(baseline - before) / MIB:+.0f} MiB after a clean close)")
    if a.metrics_url:
        at, gauge0, _ = wait_until(metric, lambda v: v == 0, 5.0, interval)
        report["gauge_at_baseline"] = gauge0
        say(f"{GAUGE} for {gpu.uuid} at baseline: {gauge0:.0f}")
        if at is None:
            failures.append(f"{GAUGE} stayed {gauge0:.0f} after a clean "
                            f"close")

    holder = Child(child_command(a, "hold", gpu.index), "hold")
    children.append(holder)
    held = holder.line("ready", a.ready_timeout)
    used = steady(gpu.used, interval, 3.0, 2 * MIB)
    rise = used - baseline
    ring = (held["prefetch"] or 0) * held["batch_bytes"]
    report.update(child=held, used_holding_mib=used / MIB,
                  rise_mib=rise / MIB, ring_lower_bound_mib=ring / MIB)
    say(f"child {held['pid']} holds a {held['transport']} stream "
        f"(prefetch {held['prefetch']}, batches of "
        f"{held['batch_bytes'] / MIB:.1f} MiB on {held['image_device']})"
        f": used memory rose by {rise / MIB:.0f} MiB (ring at least "
        f"{ring / MIB:.0f} MiB, plus the child's CUDA context)")
    if held["transport"] != "cuda_ipc" or not held["prefetch"]:
        failures.append(f"the child's stream is {held['transport']} "
                        f"with prefetch {held['prefetch']}")
    if rise < ring:
        failures.append(f"used memory rose by {rise / MIB:.0f} MiB, "
                        f"less than the ring's {ring / MIB:.0f} MiB")
    if a.metrics_url:
        gauge_held = metric()
        report["gauge_holding"] = gauge_held
        say(f"{GAUGE} while held: {gauge_held / MIB:.1f} MiB")
        if gauge_held <= 0:
            failures.append(f"{GAUGE} shows no device bytes while the "
                            f"child holds a stream")

    if held["pid"] != holder.proc.pid:
        failures.append(f"the child says it is {held['pid']}, "
                        f"Popen started {holder.proc.pid}")

    def used_reaping() -> float:
        holder.proc.poll()  # Reaps the child once it has died.
        return gpu.used()
    os.kill(holder.proc.pid, signal.SIGKILL)
    killed = time.monotonic()
    freed_at, last, seen = wait_until(
        used_reaping, lambda v: v - baseline <= tolerance, a.deadline,
        interval)
    say(f"SIGKILL sent to {holder.proc.pid}; used memory read every "
        f"{a.poll_ms} ms since")
    holder.proc.wait(timeout=10)
    report["memory_samples"] = [(round(t, 3), v / MIB) for t, v in seen]
    report["memory_back_seconds"] = freed_at
    if freed_at is None:
        failures.append(f"used memory still {(last - baseline) / MIB:.0f}"
                        f" MiB over the baseline {a.deadline:.0f} s after"
                        f" the kill")
        say(f"memory NOT back within {a.deadline:.0f} s: "
            f"{(last - baseline) / MIB:+.0f} MiB over the baseline")
    else:
        say(f"memory back within {a.tolerance_mib} MiB of the baseline "
            f"{freed_at:.3f} s after the kill ({(last - baseline) / MIB:+.0f}"
            f" MiB; readings every {a.poll_ms} ms, so to within that)")
        if freed_at > a.limit:
            failures.append(f"the ring came back in {freed_at:.3f} s, over"
                            f" the {a.limit} s allowed (--limit)")
    if a.metrics_url:
        left = max(0.5, a.deadline - (time.monotonic() - killed))
        at, gauge_end, _ = wait_until(metric, lambda v: v == 0, left,
                                      interval)
        since = time.monotonic() - killed
        report["gauge_after"] = gauge_end
        report["gauge_zero_within_seconds"] = since if at is not None \
            else None
        if at is None:
            failures.append(f"{GAUGE} still {gauge_end:.0f} "
                            f"{a.deadline:.0f} s after the kill")
            say(f"{GAUGE} NOT back to 0: {gauge_end:.0f}")
        else:
            say(f"{GAUGE} is 0 (seen {since:.3f} s after the kill)")

    after = Child(child_command(a, "warm", gpu.index), "warm")
    children.append(after)
    try:
        after.line("done", a.ready_timeout)
        after.proc.wait(timeout=30)
        say("the daemon still serves a cuda_ipc stream after the kill")
    except RuntimeError as e:
        failures.append(f"the daemon does not serve after the kill: {e}")


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]))
    p.add_argument("--address", required=True, help="unix:/path of stokerd")
    p.add_argument("--dataset", required=True)
    p.add_argument("--pipeline", required=True)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--gpu-uuid", help="the GPU (default: torch's cuda:0)")
    p.add_argument("--metrics-url",
                   help="http://127.0.0.1:PORT/metrics of the daemon")
    p.add_argument("--memory-source", choices=("torch", "nvidia-smi"),
                   default="torch")
    p.add_argument("--poll-ms", type=int, default=100)
    p.add_argument("--deadline", type=float, default=5.0,
                   help="seconds to wait for the memory after the kill")
    p.add_argument("--limit", type=float, default=1.0,
                   help="seconds the ring may take to come back")
    p.add_argument("--tolerance-mib", type=int, default=64)
    p.add_argument("--ready-timeout", type=float, default=120.0)
    p.add_argument("--out", help="write the figures here as JSON")
    p.add_argument("--role", choices=("check", "warm", "hold"),
                   default="check", help=argparse.SUPPRESS)
    p.add_argument("--device-index", type=int, default=0,
                   help=argparse.SUPPRESS)
    a = p.parse_args()
    return check(a) if a.role == "check" else child(a)


if __name__ == "__main__":
    sys.exit(main())
