"""Where the one-line Loader gets its batches: an address, the node's
daemon, or a private stokerd started for this machine's trainers.

``resolve(address, dataset, pipeline)`` decides, in this order:

1. an explicit address (a daemon serves datasets and pipelines by name);
2. ``$STOKER_ADDRESS``, for a dataset name;
3. the node daemon at ``unix:/run/stoker/stoker.sock`` when it serves the
   dataset name;
4. for a dataset path (a packed folder, or an ImageFolder packed into the
   cache) or a pack URL (s3://, http(s)://, pulled into the cache; see
   _pack_cache), a private stokerd.

A dataset with a '/' (or starting with '~' or '.') is a path; anything
else is a daemon's dataset name, and errors say which it was taken for. A
pipeline is a daemon's pipeline name with a daemon, a preset name (config/
presets) or a list of ops in the YAML's form with a private stokerd.

The private stokerd is found at ``$STOKERD``, on PATH, under sys.prefix/bin,
or in the build folder (``$STOKER_BUILD_DIR`` or the source tree's build/).
It runs from a generated config in a private runtime folder
(``$XDG_RUNTIME_DIR/stoker`` or ``/tmp/stoker-UID``, mode 0700), one daemon
per (dataset, pipeline) config: its socket, lock, config and log files are
named ``stokerd-<digest of the config>``. The first trainer that asks starts
it under the lock; the others (the local ranks of a torchrun job, a second
notebook) find it serving and attach. Each Loader holds a shared flock on
its ``.lease`` file until it is closed or its process ends, however it ends
(kill -9 too). The daemon runs in its own session with ``--idle-exit
$STOKER_IDLE_EXIT`` (default 10 s) and ``--idle-lease``: once it has had no
stream for that long and no Loader holds the lease, it takes the lease
itself (so that a trainer that comes now waits for it to go and starts a
new one, rather than attach to a leaving daemon), exits and removes its
socket. Its log is the file every error names.
"""
import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, List, Mapping, Optional, Sequence, Union

from . import _pack_cache
from .client import Client
from .errors import StokerError

NODE_SOCKET = "/run/stoker/stoker.sock"
# The names the private daemon serves its one dataset and op list under.
DATASET_NAME = "data"
OPS_NAME = "ops"
START_TIMEOUT = 60.0

Ops = Sequence[Union[str, Mapping[str, Any]]]


def is_path(dataset: Union[str, "os.PathLike[str]"]) -> bool:
    """True if `dataset` names a folder or a pack URL rather than a
    daemon's dataset."""
    if not isinstance(dataset, str):
        return True
    return "/" in dataset or dataset.startswith(("~", "."))


def find_binary(name: str, env: str) -> str:
    """The path of the executable `name`: $env, PATH, sys.prefix/bin, or
    the build folder. FileNotFoundError saying where it looked."""
    tried = []
    given = os.environ.get(env)
    if given:
        if os.access(given, os.X_OK) and os.path.isfile(given):
            return given
        raise FileNotFoundError(
            f"${env} is {given}, which is not an executable file; point it "
            f"at {name} or unset it")
    tried.append(f"${env} (unset)")
    found = shutil.which(name)
    if found:
        return found
    tried.append("PATH")
    sub = {"stokerd": "server", "stoker": "client/cli"}[name]
    source_build = Path(__file__).resolve().parents[3] / "build"
    build = Path(os.environ.get("STOKER_BUILD_DIR", source_build))
    for candidate in (Path(sys.prefix) / "bin" / name, build / sub / name):
        tried.append(str(candidate))
        if os.access(candidate, os.X_OK) and candidate.is_file():
            return str(candidate)
    raise FileNotFoundError(
        f"no {name} found: tried {', '.join(tried)}; install stoker "
        f"(cmake --install), build it (cmake --build build), or set "
        f"${env}=/path/to/{name}")


def runtime_dir() -> Path:
    """The private runtime folder, made 0700 if missing. PermissionError if
    it is not this user's alone."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    path = Path(base) / "stoker" if base else Path(
        f"/tmp/stoker-{os.getuid()}")
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.lstat()
    except OSError as e:
        raise PermissionError(
            f"cannot make the runtime folder {path} for a private stokerd: "
            f"{e.strerror}; set $XDG_RUNTIME_DIR to a folder of yours") from None
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(
            f"the runtime folder {path} is not private (owner uid "
            f"{st.st_uid}, mode {oct(st.st_mode & 0o777)}); it must be this "
            f"user's with mode 0700: remove it or set $XDG_RUNTIME_DIR")
    return path


def check_ops(ops: Ops) -> List[Any]:
    """The op list as JSON values; ValueError for one not in the YAML's
    form (each step an op name or a one-key map {op: {arg: value}})."""
    steps = list(ops)
    if not steps:
        raise ValueError("pipeline is an empty list of ops; expected e.g. "
                         "[{'decode_image': {}}, {'resize': {'size': 256}}]")
    for i, step in enumerate(steps):
        if isinstance(step, str):
            continue
        if isinstance(step, Mapping) and len(step) == 1 and isinstance(
                next(iter(step)), str):
            continue
        raise ValueError(
            f"pipeline step {i} is {step!r}; expected an op name or a map "
            f"with one key, like {{'resize': {{'size': 256}}}} "
            f"(`stokerd --help-config` lists the ops)")
    try:
        plain: List[Any] = json.loads(json.dumps(steps))
        return plain
    except (TypeError, ValueError) as e:
        raise ValueError(f"pipeline ops must be plain values (str, numbers, "
                         f"lists, dicts): {e}") from None


@dataclass(frozen=True)
class Target:
    """Where a Loader streams from and under which names."""
    address: str
    dataset: str
    pipeline: str
    # The private daemon, or None for an address or the node daemon.
    daemon: Optional["PrivateDaemon"] = None


def _serves(address: str, dataset: str) -> Optional[List[str]]:
    """The datasets the daemon at `address` serves, or None if none answers
    there (quickly: the socket must accept)."""
    path = address[len("unix:"):] if address.startswith("unix:") else None
    if path is not None and not _accepting(path):
        return None
    client = Client(address, connect_timeout=2.0)
    try:
        return [d.name for d in client.datasets()]
    except StokerError:
        return None
    finally:
        client.close()


def resolve(address: Optional[str], dataset: Union[str, "os.PathLike[str]"],
            pipeline: Union[str, Ops]) -> Target:
    """Where to stream `dataset` through `pipeline` from (module comment).
    Raises before any process is left running."""
    if address is not None:
        if is_path(dataset) or not isinstance(pipeline, str):
            what = (f"dataset {str(dataset)!r} was taken for a folder or "
                    f"a pack URL (it has a '/')" if is_path(dataset) else
                    "pipeline is a list of ops")
            raise ValueError(
                f"{what}, but the daemon at {address} serves datasets and "
                f"pipelines by the names in its config; name those, or "
                f"leave out the address to serve it from a private stokerd")
        return Target(address, str(dataset), pipeline)
    if not is_path(dataset):
        return _named(str(dataset), pipeline)
    def stoker_cli() -> str:
        return find_binary("stoker", "STOKER_CLI")

    url = isinstance(dataset, str) and _pack_cache.is_url(dataset)
    folder = Path(os.path.expanduser(str(dataset))).resolve()
    if not url and not folder.is_dir():
        raise FileNotFoundError(
            f"dataset {str(dataset)!r} was taken for a folder (it has a "
            f"'/'), and {folder} "
            f"{'is not a folder' if folder.exists() else 'does not exist'}; "
            f"pass a packed dataset or an ImageFolder")
    if isinstance(pipeline, str):
        pipelines: Any = {pipeline: {"preset": pipeline}}
        name = pipeline
    else:
        pipelines = {OPS_NAME: check_ops(pipeline)}
        name = OPS_NAME
    stokerd = find_binary("stokerd", "STOKERD")
    packed = (_pack_cache.pulled_folder(str(dataset), stoker_cli) if url
              else _pack_cache.packed_folder(folder, stoker_cli))
    daemon = PrivateDaemon(stokerd, {DATASET_NAME: {"path": str(packed)}},
                           pipelines)
    daemon.ensure()
    return Target(daemon.address, DATASET_NAME, name, daemon)


def _named(dataset: str, pipeline: Union[str, Ops]) -> Target:
    """A dataset name: $STOKER_ADDRESS, else the node daemon if it serves
    it. ValueError saying where it looked."""
    taken = (f"dataset {dataset!r} was taken for a daemon's dataset name "
             f"(it has no '/'; write ./{dataset} for a folder)")
    if not isinstance(pipeline, str):
        raise ValueError(f"{taken}, and pipeline is a list of ops, which "
                         f"only a private stokerd (a dataset folder) takes")
    env = os.environ.get("STOKER_ADDRESS")
    if env:
        return Target(env, dataset, pipeline)
    node = f"unix:{NODE_SOCKET}"
    served = _serves(node, dataset)
    if served is not None and dataset in served:
        return Target(node, dataset, pipeline)
    there = ("no daemon answers there" if served is None else
             f"it serves {', '.join(served) or 'nothing'}")
    raise ValueError(
        f"{taken}, but no daemon serves it: $STOKER_ADDRESS is unset and "
        f"the node daemon at {node}: {there}; pass address=, set "
        f"$STOKER_ADDRESS, or pass the dataset's folder")


def _accepting(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        try:
            s.connect(path)
            return True
        except OSError:
            return False


class PrivateDaemon:
    """A stokerd for this machine's trainers that ask for the same config
    (module comment). ``ensure()`` starts it or finds it running."""

    def __init__(self, stokerd: str, datasets: Mapping[str, Any],
                 pipelines: Mapping[str, Any]) -> None:
        self.stokerd = stokerd
        catalog = {"datasets": datasets, "pipelines": pipelines}
        key = hashlib.sha256(json.dumps(catalog, sort_keys=True).encode())
        folder = runtime_dir()
        stem = folder / f"stokerd-{key.hexdigest()[:12]}"
        self.socket = Path(f"{stem}.sock")
        self.log = Path(f"{stem}.log")
        self.config = Path(f"{stem}.yaml")
        self._lock = Path(f"{stem}.lock")
        self._lease_path = Path(f"{stem}.lease")
        # Open, with a shared flock, from ensure() to release().
        self._lease: Optional[IO[str]] = None
        # JSON is YAML; the listener is private to this user.
        self._config_text = json.dumps(
            {"listen": {"unix": str(self.socket), "unix_mode": "0600"},
             "workers": "auto", "prefetch": "auto", **catalog}, indent=1)
        self._proc: Optional["subprocess.Popen[bytes]"] = None
        self.pid = 0

    @property
    def address(self) -> str:
        return f"unix:{self.socket}"

    def ensure(self) -> None:
        """Takes the lease and starts the daemon unless it serves already.
        ValueError for a config it refuses (a preset or op that does not
        exist), RuntimeError if it fails to start; both name its log."""
        with open(self._lock, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self._lease is None:
                self._lease = self._take_lease()
            if _accepting(str(self.socket)):
                lock.seek(0)
                text = lock.read().strip()
                self.pid = int(text) if text.isdigit() else 0
                return
            self._start()
            lock.seek(0)
            lock.truncate()
            lock.write(str(self.pid))

    def release(self) -> None:
        """Gives the lease back: the daemon may go once it is idle."""
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.close()

    def _take_lease(self) -> IO[str]:
        """The lease file with a shared flock on it. While a leaving daemon
        holds it (it took it to exit), waits for that daemon to end."""
        lease = open(self._lease_path, "a+")
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                fcntl.flock(lease, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return lease
            except BlockingIOError:
                if time.monotonic() > deadline:
                    lease.close()
                    raise RuntimeError(
                        f"the private stokerd that holds {self._lease_path} "
                        f"to exit did not end within {START_TIMEOUT:g} s; "
                        f"see its log {self.log}") from None
                time.sleep(0.02)

    def _start(self) -> None:
        if self._proc is not None:
            self._proc.poll()  # Reaps the one that exited.
        self.config.write_text(self._config_text)
        idle = os.environ.get("STOKER_IDLE_EXIT", "10")
        with open(self.log, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} started by "
                      f"pid {os.getpid()}\n".encode())
            log.flush()
            # Its own session: a signal to the trainer's process group (a
            # Ctrl-C in a notebook) does not reach the shared daemon.
            proc = subprocess.Popen(
                [self.stokerd, "--config", str(self.config), "--idle-exit",
                 idle, "--idle-lease", str(self._lease_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, close_fds=True)
        self._proc, self.pid = proc, proc.pid
        deadline = time.monotonic() + START_TIMEOUT
        while not _accepting(str(self.socket)):
            try:
                code = proc.wait(timeout=0.02)
            except subprocess.TimeoutExpired:
                if time.monotonic() < deadline:
                    continue
                proc.kill()
                proc.wait()
                raise RuntimeError(
                    f"the private stokerd did not listen on {self.socket} "
                    f"within {START_TIMEOUT:g} s and was stopped; see its "
                    f"log {self.log}") from None
            raise self._failure(code)

    def _failure(self, code: int) -> Exception:
        lines = self.log.read_text(errors="replace").splitlines()
        # stokerd's last words: "stokerd: MESSAGE", the message's further
        # lines (one per config mistake) after it.
        starts = [i for i, line in enumerate(lines)
                  if line.startswith("stokerd: ")]
        if starts:
            message = "\n".join([lines[starts[-1]][len("stokerd: "):]] +
                                lines[starts[-1] + 1:])
        else:
            message = lines[-1] if lines else ""
        if message.startswith(str(self.config)):
            return ValueError(
                f"stokerd refused the pipeline or dataset: {message} (the "
                f"generated config is {self.config}; its log {self.log}); "
                f"fix the pipeline: `stokerd --help-config` lists the "
                f"presets and ops")
        return RuntimeError(
            f"the private stokerd exited with status {code} before it "
            f"served: {message}; see its log {self.log}")
