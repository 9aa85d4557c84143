"""Soak: 32 clients at a time against one stokerd for a bounded time, then
a spell without descriptors.

Clients are `stoker stream` processes (the C++ client library) and Python
client processes, over grpc and shm. Each does one of: stream whole epochs
to the end, cancel after a few batches, or get killed with SIGKILL in the
middle of its stream. The daemon must come back to the same open
descriptors (sockets, memfd rings) and about the same resident memory after
every wave of clients, and every client that ran to the end must have seen
each sample of each epoch exactly once.

STOKER_SOAK_SECONDS sets the length (default 120 s; 30 s against the
sanitized binaries, whose memory is not measured: ASan's quarantine grows).
"""
import json
import os
import random
import signal
import socket as socketlib
import subprocess
import sys
import time
from collections import Counter

import pytest

from conftest import (CLIENT_PIPELINES, PYTHON_CLIENT, STOKER, Daemon,
                      write_config)

SANITIZED = bool(os.environ.get("STOKER_SANITIZED"))
SOAK_SECONDS = float(os.environ.get("STOKER_SOAK_SECONDS",
                                    "30" if SANITIZED else "120"))
CLIENTS = 32
NUM_SAMPLES = 30  # The session dataset of conftest.py.
# Growth allowed between the warm-up and the end, both measured with no
# stream open: descriptors must come back exactly (a margin of 2 for gRPC's
# own housekeeping), memory within 10 % plus 16 MiB of allocator slack.
FD_SLACK = 2
RSS_SLACK = (1.10, 16 << 20)

PY_CLIENT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import stoker
address, transport, batch_size, seed, epochs = sys.argv[2:7]
ids = []
with stoker.Client(address).stream(
        "train", "bytes", batch_size=int(batch_size), seed=int(seed),
        epochs=int(epochs), transport=transport) as s:
    for batch in s:
        ids.extend(int(i) for i in batch.sample_ids)
print(json.dumps({"ids": ids, "transport": s.transport}))
"""


class Client:
    """One client process and what it must show when it ends."""

    def __init__(self, rng, daemon, tmp_path, n):
        self.kind = rng.choices(["complete", "cancel", "kill"],
                                weights=[4, 2, 3])[0]
        self.python = rng.random() < 0.15
        self.transport = rng.choice(["grpc", "shm"])
        self.batch_size = rng.randint(1, 8)
        self.epochs = rng.randint(1, 2) if self.kind == "complete" else 0
        self.max_batches = rng.randint(1, 6)
        self.kill_at = time.monotonic() + rng.uniform(0.05, 1.0)
        self.ids_path = tmp_path / f"ids-{n}.txt"
        seed = rng.randint(0, 1 << 30)
        if self.python:
            # The Python client has no --max-batches: it streams or is killed.
            if self.kind == "cancel":
                self.kind = "kill"
            args = [sys.executable, "-c", PY_CLIENT, PYTHON_CLIENT,
                    daemon.address, self.transport, self.batch_size, seed,
                    self.epochs]
        else:
            args = [STOKER, "stream", "--address", daemon.address,
                    "--dataset", "train", "--pipeline", "bytes",
                    "--batch-size", self.batch_size, "--seed", seed,
                    "--epochs", self.epochs, "--transport", self.transport,
                    "--indices-out", self.ids_path, "--json", "--quiet",
                    "--step-ms", rng.choice([0, 2, 10])]
            if self.kind == "cancel":
                args += ["--max-batches", self.max_batches]
        self.proc = subprocess.Popen([str(a) for a in args],
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)

    def describe(self):
        return (f"{'python' if self.python else 'cli'} {self.kind} over "
                f"{self.transport}, batch {self.batch_size}")

    def poll(self):
        """True once the process is gone; kills it when its time is up."""
        if self.kind == "kill" and time.monotonic() >= self.kill_at and \
                self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        return self.proc.poll() is not None

    def check(self):
        """Checks what the ended process reports; returns its kind."""
        out, err = self.proc.communicate()
        if self.kind == "kill":
            # An endless stream ends only by the kill.
            assert self.proc.returncode == -signal.SIGKILL, (
                self.describe(), self.proc.returncode, err)
            return self.kind
        assert self.proc.returncode == 0, (self.describe(), err)
        last = json.loads(out.strip().splitlines()[-1])
        if self.python:
            ids = last["ids"]
        else:
            assert last["status"] == "OK", (self.describe(), last)
            ids = [int(x) for x in self.ids_path.read_text().split()]
        assert last["transport"] == self.transport, (self.describe(), last)
        if self.kind == "cancel":
            assert last["batches"] == self.max_batches, (self.describe(), last)
            # An epoch's last batch holds what is left of its samples.
            steps = -(-NUM_SAMPLES // self.batch_size)
            assert len(ids) == sum(
                min(self.batch_size, NUM_SAMPLES - (k % steps) *
                    self.batch_size) for k in range(self.max_batches))
            for e in range(0, len(ids), NUM_SAMPLES):
                epoch = ids[e:e + NUM_SAMPLES]
                assert len(set(epoch)) == len(epoch), (self.describe(), ids)
        else:
            assert len(ids) == self.epochs * NUM_SAMPLES, (self.describe(),
                                                           len(ids))
            for e in range(self.epochs):
                epoch = Counter(ids[e * NUM_SAMPLES:(e + 1) * NUM_SAMPLES])
                assert epoch == Counter(range(NUM_SAMPLES)), (
                    self.describe(), e, epoch)
        return self.kind

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


def descriptors(pid):
    """The daemon's open descriptors: (count, memfd rings among them)."""
    fd_dir = f"/proc/{pid}/fd"
    targets = []
    for fd in os.listdir(fd_dir):
        try:
            targets.append(os.readlink(f"{fd_dir}/{fd}"))
        except FileNotFoundError:
            pass  # Closed while we looked.
    return len(targets), sum(t.startswith("/memfd:") for t in targets)


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def open_streams(daemon):
    out = subprocess.run([str(STOKER), "top", "--address", daemon.address,
                          "--once", "--json", "--interval", "0.1"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["open_streams"]


def quiesce(daemon, timeout=60):
    """Waits until no stream is open and the descriptor count has settled;
    returns (descriptors, memfds, rss)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        assert daemon.proc.poll() is None, "stokerd died: " + daemon.log()
        if open_streams(daemon) == 0:
            # The `stoker top` call itself is one connection; let it close.
            now = descriptors(daemon.proc.pid)
            if now == last:
                return now + (rss_bytes(daemon.proc.pid),)
            last = now
        time.sleep(0.2)
    raise AssertionError("streams stayed open: " + daemon.log()[-2000:])


def run_wave(daemon, rng, tmp_path, seconds, counts, first_id):
    """Keeps CLIENTS clients running for `seconds`, then lets the last ones
    end (killing the endless ones). Returns the next client number."""
    n = first_id
    running = []
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end or running:
            while time.monotonic() < end and len(running) < CLIENTS:
                running.append(Client(rng, daemon, tmp_path, n))
                n += 1
            for c in [c for c in running if c.poll()]:
                running.remove(c)
                counts[("python " if c.python else "cli ") + c.check()] += 1
            if time.monotonic() >= end:
                for c in running:
                    if c.kind == "kill":
                        c.kill_at = 0
            assert daemon.proc.poll() is None, "stokerd died: " + daemon.log()
            time.sleep(0.01)
    finally:
        for c in running:
            c.kill()
    return n


def descriptor_shortage_phase(daemon):
    """The daemon runs out of descriptors for a while (its limit lowered to
    what it has open, and connections waiting on its shm socket): the shm
    socket's accept fails, logs once, and serves again once descriptors are
    back. It used to stop for good, and every later shm open failed."""
    pid = daemon.proc.pid
    soft, hard = (int(v) for v in subprocess.run(
        ["prlimit", "--pid", str(pid), "--nofile", "--noheadings",
         "--output", "SOFT,HARD"], capture_output=True, text=True,
        check=True).stdout.split())
    waiting = []
    try:
        open_now = descriptors(pid)[0]
        subprocess.run(["prlimit", "--pid", str(pid),
                        f"--nofile={open_now}:{hard}"], check=True)
        for _ in range(4):
            s = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM)
            s.connect(f"{daemon.socket}.shm")  # Queued: accept has no fd.
            waiting.append(s)
        deadline = time.monotonic() + 30
        while "event=shm_accept_failed" not in daemon.log():
            assert time.monotonic() < deadline, "accept never ran out"
            time.sleep(0.05)
    finally:
        subprocess.run(["prlimit", "--pid", str(pid),
                        f"--nofile={soft}:{hard}"], check=True)
        for s in waiting:
            s.close()
    out = subprocess.run(
        [str(STOKER), "stream", "--address", daemon.address, "--dataset",
         "train", "--pipeline", "bytes", "--batch-size", "4", "--transport",
         "shm", "--json", "--quiet"], capture_output=True, text=True,
        timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["transport"] == "shm"
    assert daemon.log().count("event=shm_accept_failed") == 1, daemon.log()


def test_soak_32_clients_leak_nothing_and_see_exact_epochs(dataset,
                                                           tmp_path):
    socket = tmp_path / "stoker.sock"
    config = write_config(tmp_path / "stoker.yaml", dataset, socket,
                          CLIENT_PIPELINES)
    daemon = Daemon(config, socket).start()
    rng = random.Random(20261130)
    counts = Counter()
    try:
        warmup = max(10.0, SOAK_SECONDS * 0.2)
        n = run_wave(daemon, rng, tmp_path, warmup, counts, 0)
        fds0, memfds0, rss0 = quiesce(daemon)
        waves = []
        left = SOAK_SECONDS - warmup
        while left > 0:
            wave = min(left, 30.0)
            n = run_wave(daemon, rng, tmp_path, wave, counts, n)
            waves.append(quiesce(daemon))
            left -= wave
        descriptor_shortage_phase(daemon)
        waves.append(quiesce(daemon))
        report = (f"{n} clients {dict(counts)}; descriptors {fds0} -> "
                  f"{[w[0] for w in waves]}, memfds {memfds0} -> "
                  f"{[w[1] for w in waves]}, RSS {rss0 >> 20} MiB -> "
                  f"{[w[2] >> 20 for w in waves]} MiB")
        print(report)
        for fds, memfds, rss in waves:
            assert fds <= fds0 + FD_SLACK, report
            assert memfds <= memfds0, report
            if not SANITIZED:
                assert rss <= rss0 * RSS_SLACK[0] + RSS_SLACK[1], report
        # Every kind of client ran, many times.
        for kind in ("cli complete", "cli cancel", "cli kill",
                     "python complete", "python kill"):
            assert counts[kind] >= 3, report
        assert daemon.proc.poll() is None
    finally:
        daemon.stop()


def stream_damaged_until(daemon, stop, results):
    """Streams the dataset `damaged` over and over until `stop` is set,
    appending each stream's (exit code, status) to `results`."""
    while not stop.is_set():
        out = subprocess.run(
            [str(STOKER), "stream", "--address", daemon.address, "--dataset",
             "damaged", "--pipeline", "bytes", "--batch-size", "2",
             "--epochs", "1", "--transport", random.choice(["grpc", "shm"]),
             "--json", "--quiet"], capture_output=True, text=True, timeout=60)
        lines = out.stdout.strip().splitlines()
        results.append((out.returncode,
                        json.loads(lines[-1])["status"] if lines else
                        out.stderr))


def test_soak_damaged_shard_phase(dataset, tmp_path):
    """Damaged-shard phase: a second dataset's shard is truncated under the
    daemon while a wave of clients streams `train`; the damaged dataset's
    streams all end with DATA_LOSS naming the shard, and the wave's clients
    see their exact epochs and leak nothing, as in the test above."""
    import shutil
    import threading
    damaged = tmp_path / "damaged"
    shutil.copytree(dataset, damaged)
    socket = tmp_path / "stoker.sock"
    config = write_config(tmp_path / "stoker.yaml", dataset, socket,
                          CLIENT_PIPELINES)
    config.write_text(config.read_text().replace(
        "datasets:\n", f"datasets:\n  damaged: {{path: {damaged}}}\n", 1))
    daemon = Daemon(config, socket).start()
    rng = random.Random(20261215)
    counts = Counter()
    stop = threading.Event()
    results = []
    try:
        n = run_wave(daemon, rng, tmp_path, 5, counts, 0)
        fds0, memfds0, _ = quiesce(daemon)
        shard = damaged / "shard-00001.lmdb"
        size = shard.stat().st_size
        os.truncate(shard, 8192 + (size - 8192) // 2 // 4096 * 4096)
        streamer = threading.Thread(target=stream_damaged_until,
                                    args=(daemon, stop, results))
        streamer.start()
        try:
            run_wave(daemon, rng, tmp_path, max(10.0, SOAK_SECONDS * 0.25),
                     counts, n)
        finally:
            stop.set()
            streamer.join()
        fds, memfds, _ = quiesce(daemon)
        report = (f"{dict(counts)}; damaged streams {results[:3]} ... "
                  f"({len(results)}); descriptors {fds0} -> {fds}, memfds "
                  f"{memfds0} -> {memfds}")
        print(report)
        assert results, report
        for code, status in results:
            assert code == 1 and status.startswith("DATA_LOSS"), report
            assert "dataset 'damaged'" in status and shard.name in status, \
                report
        assert fds <= fds0 + FD_SLACK and memfds <= memfds0, report
        assert counts["cli complete"] >= 3, report
        assert daemon.proc.poll() is None
    finally:
        daemon.stop()
