"""The one-line Loader: Loader(dataset=FOLDER, pipeline=PRESET or ops,
batch_size=N) with no daemon and no config, its private stokerd (shared,
gone after the last trainer, kill -9 too), the pack cache, and every bad
input raising before training with no process left behind. Also stokerd
without a config file (--dataset/--pipeline) and its --idle-exit."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import PYTHON_CLIENT, STOKER, STOKERD, run, wait_for
from storage_servers import Nginx

torch = pytest.importorskip("torch")
from stoker import _local  # noqa: E402
from stoker.errors import StokerError  # noqa: E402
from stoker.torch import Loader  # noqa: E402


def gone(pid):
    """True once `pid` has exited (a zombie nobody reaped counts)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def processes_under(folder):
    """PIDs of the processes whose command line names `folder`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or gone(int(entry)):
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if str(folder).encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.fixture
def local_env(monkeypatch):
    """A private runtime folder (short: socket paths are at most 107 bytes)
    and pack cache, the built binaries, a 1 s idle exit. Stops by PID any
    stokerd still running from the runtime folder at the end."""
    run_dir = Path(tempfile.mkdtemp(prefix="stk-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run_dir))
    monkeypatch.setenv("STOKER_CACHE", str(run_dir / "cache"))
    monkeypatch.setenv("STOKERD", str(STOKERD))
    monkeypatch.setenv("STOKER_CLI", str(STOKER))
    monkeypatch.setenv("STOKER_IDLE_EXIT", "1")
    monkeypatch.delenv("STOKER_ADDRESS", raising=False)
    yield run_dir
    for pid in processes_under(run_dir):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(run_dir, ignore_errors=True)


def first_batch(loader):
    for batch in loader:
        return batch
    raise AssertionError("no batch")


def test_one_line_loader_packs_an_image_folder_once(local_env, images,
                                                    capfd):
    loader = Loader(dataset=str(images), pipeline="imagenet_val",
                    batch_size=4)
    batch = first_batch(loader)
    assert batch["image"].shape == (4, 3, 224, 224)
    assert batch["image"].dtype == torch.float16
    assert "packing the ImageFolder" in capfd.readouterr().err
    packs = list((local_env / "cache" / "packs").glob("src-*-*[0-9a-f]"))
    assert len(packs) == 1 and (packs[0] / "manifest.json").is_file()

    # Unchanged: the same pack, not packed again; the daemon (kept by the
    # first loader's open stream) is shared.
    again = Loader(dataset=str(images), pipeline="imagenet_val", batch_size=4)
    assert "packing" not in capfd.readouterr().err
    assert again.daemon.pid == loader.daemon.pid
    assert again.daemon.log == loader.daemon.log
    loader.close()

    # A changed file: packed again, the old pack removed.
    some = next(p for p in sorted(images.rglob("*.jpg")))
    st = some.stat()
    os.utime(some, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    try:
        Loader(dataset=str(images), pipeline="imagenet_val", batch_size=4)
    finally:
        os.utime(some, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert "packing the ImageFolder" in capfd.readouterr().err
    now = list((local_env / "cache" / "packs").glob("src-*-*[0-9a-f]"))
    assert len(now) == 1 and now != packs


def test_a_packed_folder_and_a_list_of_ops(local_env, dataset):
    ops = [{"decode_image": {}}, {"center_crop": {"size": 24}}]
    with Loader(dataset=str(dataset), pipeline=ops, batch_size=5) as loader:
        batch = first_batch(loader)
    assert batch["image"].shape == (5, 24, 24, 3)
    assert batch["image"].dtype == torch.uint8
    assert not (local_env / "cache").exists()  # A packed folder: no cache.


def test_a_pack_url_is_pulled_once_and_served_as_the_local_pack(
        local_env, dataset, tmp_path, capfd):
    root = tmp_path / "www"
    shutil.copytree(dataset, root / "d" / "train")
    server = Nginx(root, tmp_path / "nginx").start()
    try:
        ops = [{"decode_image": {}}, {"center_crop": {"size": 24}}]
        url = f"{server.url}/d/train"
        with Loader(dataset=url, pipeline=ops, batch_size=5) as loader:
            remote = first_batch(loader)
        err = capfd.readouterr().err
        assert f"pulling {url}" in err and "pulled train" in err
        with Loader(dataset=str(dataset), pipeline=ops, batch_size=5) as local:
            expected = first_batch(local)
        assert torch.equal(remote["image"], expected["image"])
        assert remote.sample_ids == expected.sample_ids

        # Pulled already: the second start checks the manifest, moves nothing.
        with Loader(dataset=url, pipeline=ops, batch_size=5) as again:
            first_batch(again)
        assert "0 B moved" in capfd.readouterr().err

        missing = f"{server.url}/d/nothing"
        with pytest.raises(RuntimeError, match="stoker pull " + missing):
            Loader(dataset=missing, pipeline=ops, batch_size=5)
    finally:
        server.stop()


TRAINER = """
import json, sys
from stoker.torch import Loader
loader = Loader(dataset=sys.argv[1], pipeline="imagenet_train", batch_size=2)
it = iter(loader)
next(it)
print(json.dumps({"pid": loader.daemon.pid,
                  "socket": str(loader.daemon.socket)}), flush=True)
sys.stdin.read()
"""


def shm_files():
    """The names in /dev/shm, less the semaphores of Python's
    multiprocessing (sem.*) that tests running beside this one make."""
    return {n for n in os.listdir("/dev/shm") if not n.startswith("sem.")}


def start_trainer(dataset):
    env = dict(os.environ, PYTHONPATH=str(PYTHON_CLIENT))
    return subprocess.Popen([sys.executable, "-c", TRAINER, str(dataset)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env=env, text=True)


def test_trainers_share_one_daemon_that_goes_after_a_kill_9(local_env,
                                                            dataset):
    shm_before = shm_files()
    trainers = [start_trainer(dataset) for _ in range(2)]
    try:
        said = [json.loads(t.stdout.readline()) for t in trainers]
    finally:
        for t in trainers:
            t.kill()  # SIGKILL: no Python cleanup runs.
            t.wait()
    assert said[0] == said[1], "both trainers use one daemon"
    pid, socket = said[0]["pid"], Path(said[0]["socket"])
    assert wait_for(lambda: gone(pid)), "the daemon outlived its trainers"
    assert not socket.exists()
    assert shm_files() <= shm_before
    assert processes_under(local_env) == []


def test_a_loader_keeps_the_daemon_until_it_is_closed(local_env, dataset):
    loader = Loader(dataset=str(dataset), pipeline="imagenet_val",
                    batch_size=3)
    first = loader.daemon.pid
    # Idle, but the Loader holds its lease: a daemon that would have gone
    # after 1 s without streams is still there after three.
    assert not wait_for(lambda: gone(first), timeout=3)
    loader.close()
    assert wait_for(lambda: gone(first)), "no idle exit after close()"
    assert first_batch(loader)["image"].shape == (3, 3, 224, 224)
    assert loader.daemon.pid != first
    loader.close()


# Bad input: an exception that names the thing, the path and what to do,
# raised before training, with no process left.

def test_an_error_while_training_names_the_private_daemons_log(local_env,
                                                                dataset):
    ops = [{"decode_image": {}}, {"center_crop": {"size": 24}}]
    loader = Loader(dataset=str(dataset), pipeline=ops, batch_size=2,
                    reconnect_timeout=1.0)
    batches = iter(loader)
    next(batches)
    os.kill(loader.daemon.pid, signal.SIGKILL)
    with pytest.raises(StokerError) as raised:
        for _ in batches:
            pass
    assert str(loader.daemon.log) in str(raised.value)
    loader.close()


def test_a_missing_folder(local_env, tmp_path):
    with pytest.raises(FileNotFoundError,
                       match="taken for a folder .* does not exist"):
        Loader(dataset=str(tmp_path / "nope"), pipeline="raw", batch_size=2)


def test_a_folder_without_images(local_env, tmp_path):
    (tmp_path / "cls").mkdir()
    (tmp_path / "cls" / "notes.txt").write_text("not an image")
    with pytest.raises(ValueError, match=f"{tmp_path} has no images"):
        Loader(dataset=str(tmp_path), pipeline="raw", batch_size=2)


def test_an_unknown_preset(local_env, dataset):
    with pytest.raises(ValueError) as e:
        Loader(dataset=str(dataset), pipeline="imagenet_trian", batch_size=2)
    message = str(e.value)
    assert "unknown preset 'imagenet_trian'" in message
    assert "imagenet_train" in message and "stokerd-" in message  # Its log.
    assert processes_under(local_env) == []


def test_a_list_of_ops_with_a_mistake(local_env, dataset):
    with pytest.raises(ValueError, match="unknown op 'resise'"):
        Loader(dataset=str(dataset), pipeline=[{"resise": {"size": 8}}],
               batch_size=2)
    with pytest.raises(ValueError, match="pipeline step 1 is"):
        Loader(dataset=str(dataset), pipeline=["decode_image", 3],
               batch_size=2)
    assert processes_under(local_env) == []


def test_no_stokerd(local_env, dataset, monkeypatch):
    monkeypatch.delenv("STOKERD")
    monkeypatch.setenv("PATH", str(local_env))
    monkeypatch.setenv("STOKER_BUILD_DIR", str(local_env / "no-build"))
    with pytest.raises(FileNotFoundError,
                       match=r"no stokerd found: tried \$STOKERD"):
        Loader(dataset=str(dataset), pipeline="raw", batch_size=2)


def test_a_cache_that_cannot_be_written(local_env, images, monkeypatch):
    blocker = local_env / "file"
    blocker.write_text("")  # A file where the cache's folder would be.
    monkeypatch.setenv("STOKER_CACHE", str(blocker / "cache"))
    with pytest.raises(PermissionError,
                       match=f"cannot write the cache {blocker}"):
        Loader(dataset=str(images), pipeline="raw", batch_size=2)
    assert processes_under(local_env) == []


def test_a_daemon_that_fails_to_start(local_env, dataset):
    # Something that is not a socket where the daemon's socket goes.
    daemon = _local.PrivateDaemon(
        str(STOKERD), {"data": {"path": str(dataset)}},
        {"imagenet_val": {"preset": "imagenet_val"}})
    daemon.socket.mkdir()
    (daemon.socket / "keep").write_text("")
    with pytest.raises(RuntimeError,
                       match="exited with status 1 before it served"):
        Loader(dataset=str(dataset), pipeline="imagenet_val", batch_size=2)
    assert processes_under(local_env) == []


def test_a_name_no_daemon_serves(local_env):
    with pytest.raises(ValueError,
                       match="'train' was taken for a daemon's dataset name"):
        Loader(dataset="train", pipeline="train", batch_size=2)


def test_a_folder_with_an_address(local_env, dataset):
    with pytest.raises(ValueError, match="taken for a folder"):
        Loader("unix:/nonexistent.sock", str(dataset), "train", 2)


def test_stoker_address_serves_a_name(local_env, client_daemon, monkeypatch):
    monkeypatch.setenv("STOKER_ADDRESS", client_daemon.address)
    with Loader(dataset="train", pipeline="half", batch_size=2) as loader:
        assert first_batch(loader)["image"].shape == (2, 20, 20, 3)
        assert loader.daemon is None


# stokerd without a config file.

def test_stokerd_serves_from_flags_and_exits_when_idle(dataset, tmp_path):
    socket = tmp_path / "s.sock"
    log = open(tmp_path / "log", "w")
    proc = subprocess.Popen(
        [str(STOKERD), "--dataset", f"train={dataset}", "--pipeline",
         "train=imagenet_val", "--listen", f"unix:{socket}", "--idle-exit",
         "0.5"], stderr=log)
    try:
        assert wait_for(lambda: _local._accepting(str(socket))), \
            (tmp_path / "log").read_text()
        with Loader(f"unix:{socket}", "train", "train", 2) as loader:
            assert first_batch(loader)["image"].shape == (2, 3, 224, 224)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not socket.exists()
    assert "idle_exit" in (tmp_path / "log").read_text()


def test_help_config_lists_the_presets():
    out = run([STOKERD, "--help-config"]).stdout
    assert "## Pipeline presets" in out
    for name in ("imagenet_train", "imagenet_val", "torchvision_recipe",
                 "deit", "dino", "raw"):
        assert f"| `{name}` |" in out
