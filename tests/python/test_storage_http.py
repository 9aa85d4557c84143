"""`stoker pull` and `stoker push` against a real nginx on loopback (and a
fault-injecting proxy in front of it): verified copies, resume after kill -9,
the lock, retries, a corrupt copy, packs without digests."""
import json
import os
import pty
import shutil
import signal
import subprocess

import pytest

from conftest import STOKER, run
from storage_servers import FaultProxy, Nginx, wait_for


@pytest.fixture
def served(tmp_path, dataset):
    """nginx serving a folder that holds a copy of `dataset` as d/train."""
    root = tmp_path / "www"
    shutil.copytree(dataset, root / "d" / "train")
    server = Nginx(root, tmp_path / "nginx").start()
    yield server, root
    server.stop()


def files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file()}


def test_pull_over_http_copies_the_dataset_checked(tmp_path, served, dataset):
    server, _ = served
    dest = tmp_path / "dest"
    r = run([STOKER, "pull", f"{server.url}/d/train", dest, "--chunk-size",
             "16KiB"])
    assert "pulled train: 6 files" in r.stdout
    assert files(dest) == files(dataset)
    assert "0 errors" in run([STOKER, "verify", dest]).stdout
    again = run([STOKER, "pull", f"{server.url}/d/train", dest])
    assert "0 B moved" in again.stdout and "6 already there" in again.stdout


def test_progress_lines_name_bytes_rate_and_eta_off_a_terminal(tmp_path,
                                                               served):
    server, _ = served
    r = run([STOKER, "pull", f"{server.url}/d/train", tmp_path / "dest"])
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("pull 100.0%")
    assert "files 6/6" in last and "/s" in last and "ETA" in last


def test_push_over_http_writes_the_manifest_last(tmp_path, served, dataset):
    server, root = served
    proxy = FaultProxy(server.port).start()
    try:
        run([STOKER, "push", dataset, f"{proxy.url}/up/train"])
        puts = [p for m, p in proxy.faults.requests if m == "PUT"]
    finally:
        proxy.stop()
    assert puts[-1] == "/up/train/manifest.json"
    assert len(puts) == 7
    assert files(root / "up" / "train") == files(dataset)


def test_a_corrupt_copy_is_fetched_again_then_fails_naming_shard_and_url(
        tmp_path, served):
    server, root = served
    shard = root / "d" / "train" / "shard-00001.lmdb"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 1
    shard.write_bytes(bytes(data))
    dest = tmp_path / "dest"
    r = run([STOKER, "pull", f"{server.url}/d/train", dest], check=False)
    assert r.returncode == 1
    assert "fetching it again" in r.stderr
    assert (f"shard shard-00001.lmdb from {server.url}/d/train/"
            "shard-00001.lmdb: digest is xxh3-128:") in r.stderr
    assert "(fetched twice)" in r.stderr
    assert not (dest / "manifest.json").exists()
    assert not (dest / "shard-00001.lmdb").exists()


def strip_digests(folder):
    """Makes `folder` look like a pack made before shard digests."""
    m = json.loads((folder / "manifest.json").read_text())
    for s in m["shards"]:
        s.pop("digest")
        (folder / s.pop("index")["file"]).unlink()
    (folder / "manifest.json").write_text(json.dumps(m, indent=2))


def test_a_pack_without_digests_is_checked_record_by_record(tmp_path, served):
    server, root = served
    train = root / "d" / "train"
    strip_digests(train)
    dest = tmp_path / "dest"
    run([STOKER, "pull", f"{server.url}/d/train", dest])
    assert files(dest) == files(train)
    # A flipped byte inside a record's value: its checksum catches it.
    run([STOKER, "verify", train])
    idx_free = train / "shard-00002.lmdb"
    data = bytearray(idx_free.read_bytes())
    pos = data.find(b"\xff\xd8\xff")  # A JPEG inside a record.
    data[pos + 200] ^= 1
    idx_free.write_bytes(bytes(data))
    r = run([STOKER, "pull", f"{server.url}/d/train", tmp_path / "dest2"],
            check=False)
    assert r.returncode == 1
    assert "shard shard-00002.lmdb from" in r.stderr
    assert "bad record(s), the first: shard-00002.lmdb.part, key" in r.stderr
    assert "checksum mismatch" in r.stderr


def test_503s_and_cut_connections_are_retried(tmp_path, served, dataset):
    server, _ = served
    proxy = FaultProxy(server.port).start()
    proxy.faults.fail_next = 3
    proxy.faults.cut_next = 2
    try:
        dest = tmp_path / "dest"
        run([STOKER, "pull", f"{proxy.url}/d/train", dest, "--chunk-size",
             "32KiB", "--parallel", "2"])
    finally:
        proxy.stop()
    assert proxy.faults.fail_next == 0 and proxy.faults.cut_next == 0
    assert files(dest) == files(dataset)


def test_a_source_that_stays_down_fails_with_the_url_and_status(tmp_path,
                                                               served):
    server, _ = served
    proxy = FaultProxy(server.port).start()
    proxy.faults.fail_next = 1000
    try:
        r = run([STOKER, "pull", f"{proxy.url}/d/train", tmp_path / "dest",
                 "--retries", "2"], check=False)
    finally:
        proxy.stop()
    assert r.returncode == 1
    assert (f"GET {proxy.url}/d/train/manifest.json: HTTP 503 Service "
            "Unavailable (SlowDown: injected) (after 3 attempts)") in r.stderr


def test_a_killed_pull_resumes_without_fetching_finished_shards(tmp_path,
                                                                served,
                                                                dataset):
    server, _ = served
    proxy = FaultProxy(server.port).start()
    try:
        proxy.faults.rate = 256 * 1024
        dest = tmp_path / "dest"
        pull = subprocess.Popen(
            [str(STOKER), "pull", f"{proxy.url}/d/train", str(dest),
             "--parallel", "1", "--chunk-size", "16KiB"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            # The record indexes come first, then the shards.
            wait_for(lambda: (dest / "shard-00000.lmdb").exists(), 60,
                     "the first shard to be published")
        finally:
            pull.send_signal(signal.SIGKILL)
            pull.wait()
        assert not (dest / "manifest.json").exists()
        finished = {p.name for p in dest.iterdir() if p.is_file()}
        assert "shard-00000.lmdb" in finished
        with proxy.faults.lock:
            proxy.faults.served.clear()
            proxy.faults.rate = 0
        r = run([STOKER, "pull", f"{proxy.url}/d/train", dest])
        assert "resuming:" in r.stderr
        served_now = dict(proxy.faults.served)
    finally:
        proxy.stop()
    assert not finished & set(served_now), served_now
    assert "shard-00002.lmdb" in served_now
    assert files(dest) == files(dataset)


def test_two_pulls_never_write_one_dest(tmp_path, served):
    server, _ = served
    proxy = FaultProxy(server.port).start()
    try:
        proxy.faults.rate = 64 * 1024
        dest = tmp_path / "dest"
        first = subprocess.Popen(
            [str(STOKER), "pull", f"{proxy.url}/d/train", str(dest)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: (dest / ".stoker-pull" / "lock").exists() and
                     (dest / ".stoker-pull" / "lock").read_text() ==
                     str(first.pid), 30, "the first pull's lock")
            second = run([STOKER, "pull", f"{proxy.url}/d/train", dest],
                         check=False)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
    finally:
        proxy.stop()
    assert second.returncode == 1
    assert f"another pull (pid {first.pid}) is writing {dest}" in second.stderr


def test_a_stalled_answer_is_cut_and_retried_then_reported(tmp_path, served):
    server, _ = served
    proxy = FaultProxy(server.port).start()
    proxy.faults.latency = 3.0
    try:
        r = run([STOKER, "pull", f"{proxy.url}/d/train", tmp_path / "dest",
                 "--stall-timeout", "1", "--retries", "1"], check=False)
    finally:
        proxy.stop()
    assert r.returncode == 1
    assert f"GET {proxy.url}/d/train/manifest.json: " in r.stderr
    assert "(after 2 attempts)" in r.stderr


def test_a_terminal_gets_a_bar_redrawn_in_place(tmp_path, served):
    server, _ = served
    main, child = pty.openpty()
    with open(main, "rb", buffering=0, closefd=True) as terminal:
        proc = subprocess.Popen(
            [str(STOKER), "pull", f"{server.url}/d/train", str(tmp_path / "d")],
            stdout=subprocess.DEVNULL, stderr=child)
        os.close(child)
        shown = b""
        while True:
            try:
                piece = terminal.read(4096)
            except OSError:  # EIO: the child closed the terminal.
                break
            if not piece:
                break
            shown += piece
        assert proc.wait(60) == 0
    text = shown.decode()
    assert "\rpull [########################] 100.0%" in text
    assert "files 6/6" in text and "ETA" in text
