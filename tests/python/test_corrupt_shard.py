"""A bit flipped in a shard on disk, under a running daemon's feet: the
stream over that dataset gets DATA_LOSS naming the shard file and the key
(on_corrupt: fail) or skips exactly that sample (on_corrupt: skip, the
default), and the same daemon keeps serving its other dataset."""
import json
from collections import Counter

import pytest

from conftest import STOKER, Daemon, TRAIN_PIPELINE, run

FLIPPED_ID = 7
NUM_SAMPLES = 30  # The session images of conftest.py.


def flip_one_bit(dataset_dir, images_dir, sample_id):
    """Flips one bit in the middle of sample `sample_id`'s JPEG bytes inside
    its shard file. Ids follow sorted source paths (ImageFolder order)."""
    sources = sorted(p.relative_to(images_dir).as_posix()
                     for p in images_dir.rglob("*.jpg"))
    assert len(sources) == NUM_SAMPLES
    jpeg = (images_dir / sources[sample_id]).read_bytes()
    hits = []
    for shard in sorted(dataset_dir.glob("shard-*.lmdb")):
        data = shard.read_bytes()
        at = data.find(jpeg)
        if at >= 0:
            assert data.find(jpeg, at + 1) < 0
            hits.append((shard, at))
    assert len(hits) == 1, f"sample {sample_id} found in {hits}"
    shard, at = hits[0]
    data = bytearray(shard.read_bytes())
    data[at + len(jpeg) // 2] ^= 0x10
    shard.write_bytes(bytes(data))
    return shard.name


def stream(daemon, dataset, tmp_path, transport="grpc"):
    ids = tmp_path / f"{dataset}-{transport}.txt"
    out = run([STOKER, "stream", "--address", daemon.address, "--dataset",
               dataset, "--pipeline", "train", "--batch-size", 4, "--epochs",
               1, "--seed", 3, "--transport", transport, "--indices-out", ids,
               "--json", "--quiet"], check=False)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return out, result, [int(x) for x in ids.read_text().split()]


@pytest.mark.parametrize("on_corrupt", ["fail", "skip"])
def test_bit_flip_is_data_loss_and_the_daemon_serves_on(
        images, tmp_path, on_corrupt):
    good = tmp_path / "good"
    flipped = tmp_path / "flipped"
    for d in (good, flipped):
        run([STOKER, "pack", images, d, "--shards", 3])
    shard = flip_one_bit(flipped, images, FLIPPED_ID)

    # `stoker verify` is the offline check of the same thing.
    out = run([STOKER, "verify", flipped], check=False)
    assert out.returncode == 1
    assert shard in out.stdout + out.stderr

    socket = tmp_path / "stoker.sock"
    config = tmp_path / "stoker.yaml"
    config.write_text(
        f"listen: {{unix: {socket}}}\nworkers: 2\nmemory_budget: 64MiB\n"
        f"on_corrupt: {on_corrupt}\n"
        f"datasets:\n  flipped: {{path: {flipped}}}\n  good: {{path: {good}}}\n"
        "pipelines:\n" + TRAIN_PIPELINE)
    daemon = Daemon(config, socket).start()
    try:
        for transport in ("grpc", "shm"):
            out, result, ids = stream(daemon, "flipped", tmp_path, transport)
            if on_corrupt == "fail":
                assert out.returncode == 1
                assert result["status"].startswith("DATA_LOSS"), result
                for part in ("dataset 'flipped'", shard,
                             f"key {FLIPPED_ID}"):
                    assert part in result["status"], (part, result)
                # Once each: it used to read "dataset 'flipped' sample N:
                # dataset 'flipped': shard ...".
                assert result["status"].count("dataset 'flipped'") == 1, result
                # The batches before the bad one were delivered in full.
                assert FLIPPED_ID not in ids
                assert len(ids) % 4 == 0 and len(set(ids)) == len(ids)
            else:
                assert out.returncode == 0, out.stderr
                assert result["status"] == "OK"
                assert result["skipped_samples"] == 1
                assert sorted(ids) == sorted(set(range(NUM_SAMPLES)) -
                                             {FLIPPED_ID})
            assert daemon.proc.poll() is None, "stokerd died: " + daemon.log()

            # The other dataset, in the same daemon, streams in full.
            out, result, ids = stream(daemon, "good", tmp_path, transport)
            assert out.returncode == 0, out.stderr
            assert result["status"] == "OK" and result["skipped_samples"] == 0
            assert Counter(ids) == Counter(range(NUM_SAMPLES))
        if on_corrupt == "fail":  # The stream's close is logged with why.
            log = daemon.log()
            assert shard in log and f"key {FLIPPED_ID}" in log
    finally:
        daemon.stop()
