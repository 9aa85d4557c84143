"""Fixtures for tests that drive the built binaries as a user would.

They find the binaries in $STOKER_BUILD_DIR (default: build/), make images
with bench/make_images.py in a temp dir, pack them with `stoker pack`, and run
`stokerd` on a unix socket in the temp dir. Every process a test starts is
stopped by PID when the test ends.
"""
import os
import signal
import socket as socketlib
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("STOKER_BUILD_DIR", ROOT / "build"))
STOKER = BUILD / "client" / "cli" / "stoker"
STOKERD = BUILD / "server" / "stokerd"

TRAIN_PIPELINE = """\
  train:
    - decode_jpeg: {}
    - random_resized_crop: {size: 32}
    - random_flip: {}
    - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], dtype: float32}
    - layout: chw
"""


def wait_for(predicate, timeout=30.0):
    """True as soon as predicate() is, False if it is still not after
    `timeout` seconds: the pytest twin of tests/testing's WaitFor."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return bool(predicate())


def run(args, check=True, **kwargs):
    return subprocess.run([str(a) for a in args], capture_output=True,
                          text=True, check=check, timeout=300, **kwargs)


def make_images(out, count, classes=3, seed=0):
    run([sys.executable, ROOT / "bench" / "make_images.py", out, "--count",
         count, "--classes", classes, "--seed", seed, "--min-size", 40,
         "--max-size", 96])
    return out


@pytest.fixture(scope="session")
def images(tmp_path_factory):
    return make_images(tmp_path_factory.mktemp("images") / "src", 30)


@pytest.fixture(scope="session")
def dataset(images, tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "train"
    run([STOKER, "pack", images, out, "--shards", 3])
    return out


def write_config(path, dataset_dir, socket, extra=""):
    path.write_text(
        f"listen: {{unix: {socket}}}\n"
        "workers: 2\n"
        "memory_budget: 256MiB\n"
        "datasets:\n"
        f"  train: {{path: {dataset_dir}}}\n"
        "pipelines:\n" + TRAIN_PIPELINE + extra)
    return path


class Daemon:
    """A stokerd subprocess on a unix socket; stopped by PID. Its log goes to
    a file beside the socket (a pipe nobody drains would block the daemon
    once full: it logs every stream open and close)."""

    def __init__(self, config, socket, prefix=()):
        self.config = config
        self.socket = Path(socket)
        self.log_path = self.socket.parent / "stokerd.log"
        self.prefix = [str(a) for a in prefix]  # e.g. taskset -c 0
        self.proc = None

    def start(self):
        # A socket file left by a killed daemon stays: stokerd must clear it.
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(
                self.prefix + [str(STOKERD), "--config", str(self.config)],
                stderr=log)
        deadline = time.monotonic() + 30
        while not self._accepting():
            if self.proc.poll() is not None:
                raise RuntimeError("stokerd exited: " + self.log())
            if time.monotonic() > deadline:
                raise RuntimeError("stokerd did not start listening")
            time.sleep(0.02)
        return self

    def log(self):
        """Everything the daemon (and its earlier runs) logged."""
        return self.log_path.read_text()

    def _accepting(self):
        with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as s:
            try:
                s.connect(str(self.socket))
                return True
            except OSError:
                return False

    @property
    def address(self):
        return f"unix:{self.socket}"

    def signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout=30):
        return self.proc.wait(timeout=timeout)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def daemon(dataset, tmp_path):
    socket = tmp_path / "stoker.sock"
    d = Daemon(write_config(tmp_path / "stoker.yaml", dataset, socket), socket)
    d.start()
    yield d
    d.stop()


# For the Python client's tests (test_client_*.py): the package is imported
# from the source tree, and a daemon serves more pipelines than `train`.

PYTHON_CLIENT = ROOT / "client" / "python"
if str(PYTHON_CLIENT) not in sys.path:
    sys.path.insert(0, str(PYTHON_CLIENT))

CLIENT_PIPELINES = """\
  half:
    - decode_jpeg: {}
    - resize: {size: 24}
    - center_crop: {size: 20}
    - normalize: {mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25], dtype: float16}
    - layout: hwc
  bytes:
    - decode_jpeg: {}
    - random_resized_crop: {size: 16}
    - normalize: {mean: [0, 0, 0], std: [1, 1, 1], dtype: uint8}
"""


@pytest.fixture
def client_daemon(dataset, tmp_path):
    """A stokerd with the `train`, `half` (float16 HWC) and `bytes` (uint8)
    pipelines on a temp unix socket."""
    socket = tmp_path / "stoker.sock"
    d = Daemon(write_config(tmp_path / "stoker.yaml", dataset, socket,
                            CLIENT_PIPELINES), socket)
    d.start()
    yield d
    d.stop()
