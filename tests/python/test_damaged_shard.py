"""A shard file damaged under a serving daemon's feet, the way that used to
kill stokerd with SIGBUS inside its mmap read: truncated, or one bit flipped
in an LMDB page header so that LMDB reads past the end of the file. The
stream over that dataset ends with DATA_LOSS naming the dataset and shard
file, the daemon lives on and streams its other dataset in full, `stoker
top` shows the dataset unhealthy, and `stoker verify` reports the damage and
exits 1 (without a signal)."""
import json
import struct
import sys
from collections import Counter

import pytest

from conftest import ROOT, STOKER, Daemon, TRAIN_PIPELINE, run

NUM_SAMPLES = 30
PAGE = 4096
P_LEAF = 0x02


def truncate(shard):
    """Cuts a shard to its two meta pages plus half of the rest."""
    size = shard.stat().st_size
    keep = 2 * PAGE + (size - 2 * PAGE) // 2 // PAGE * PAGE
    with open(shard, "r+b") as f:
        f.truncate(keep)


def flip_last_leaf_lower(shard):
    """Flips bit 15 of mp_lower in the header of the shard's last page, a
    leaf: LMDB then believes the page holds 16384 more keys, and its binary
    search reads a key pointer 16 KB past the page, past the end of the
    file but inside LMDB's map (the packer maps twice the file)."""
    data = bytearray(shard.read_bytes())
    last = len(data) - PAGE
    # Page header: pgno u64, pad u16, flags u16, lower u16, upper u16.
    pgno, _, flags, lower, _ = struct.unpack_from("<QHHHH", data, last)
    assert pgno == last // PAGE and flags == P_LEAF, (pgno, flags)
    struct.pack_into("<H", data, last + 12, lower ^ 0x8000)
    shard.write_bytes(bytes(data))


def stream(daemon, dataset, tmp_path, transport="grpc"):
    ids = tmp_path / f"{dataset}-{transport}.txt"
    out = run([STOKER, "stream", "--address", daemon.address, "--dataset",
               dataset, "--pipeline", "train", "--batch-size", 2, "--epochs",
               1, "--seed", 3, "--transport", transport, "--indices-out", ids,
               "--json", "--quiet"], check=False)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return out, result, [int(x) for x in ids.read_text().split()]


def top(daemon):
    out = run([STOKER, "top", "--address", daemon.address, "--once", "--json",
               "--interval", 0.1])
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def small_images(tmp_path_factory):
    # About 1 KB each, so that LMDB keeps every value in its leaf pages and
    # a shard's last page is a leaf.
    out = tmp_path_factory.mktemp("small") / "src"
    run([sys.executable, ROOT / "bench" / "make_images.py", out, "--count",
         NUM_SAMPLES, "--classes", 3, "--seed", 5, "--min-size", 16,
         "--max-size", 24])
    return out


@pytest.mark.parametrize("damage", ["truncated", "bit_flipped"])
@pytest.mark.parametrize("on_corrupt", ["fail", "skip"])
def test_damaged_shard_is_data_loss_and_the_daemon_serves_on(
        small_images, tmp_path, damage, on_corrupt):
    good = tmp_path / "good"
    damaged = tmp_path / "damaged"
    for d in (good, damaged):
        run([STOKER, "pack", small_images, d, "--shards", 3])
    socket = tmp_path / "stoker.sock"
    config = tmp_path / "stoker.yaml"
    config.write_text(
        f"listen: {{unix: {socket}}}\nworkers: 2\nmemory_budget: 64MiB\n"
        f"on_corrupt: {on_corrupt}\n"
        f"datasets:\n  damaged: {{path: {damaged}}}\n"
        f"  good: {{path: {good}}}\n"
        "pipelines:\n" + TRAIN_PIPELINE)
    daemon = Daemon(config, socket).start()
    try:
        # Opened and checked at start; damaged while it serves.
        shard = damaged / "shard-00002.lmdb"
        (truncate if damage == "truncated" else flip_last_leaf_lower)(shard)

        out, result, ids = stream(daemon, "damaged", tmp_path)
        # Even under on_corrupt: skip: the shard, not one record, is bad.
        assert out.returncode == 1, out.stderr
        assert result["status"].startswith("DATA_LOSS"), result
        for part in ("dataset 'damaged'", shard.name):
            assert part in result["status"], (part, result)
        if damage == "truncated":
            assert "SIGBUS" in result["status"], result
        assert daemon.proc.poll() is None, "stokerd died: " + daemon.log()

        # The other dataset, in the same daemon, streams in full.
        for transport in ("grpc", "shm"):
            out, result, ids = stream(daemon, "good", tmp_path, transport)
            assert out.returncode == 0, out.stderr
            assert result["status"] == "OK", result
            assert Counter(ids) == Counter(range(NUM_SAMPLES))

        view = top(daemon)
        assert [d["dataset"] for d in view["damaged_datasets"]] == ["damaged"]
        assert shard.name in view["damaged_datasets"][0]["shards"][0]
        assert daemon.proc.poll() is None, "stokerd died: " + daemon.log()
    finally:
        daemon.stop()

    out = run([STOKER, "verify", damaged], check=False)
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    assert shard.name in out.stdout + out.stderr
    assert run([STOKER, "verify", good]).returncode == 0
