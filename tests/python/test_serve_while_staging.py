"""Serving a dataset while stokerd stages it: a real nginx (and s3rver)
behind the fault proxy with latency and a bandwidth limit. A stream opens
before the copy completes and gets the bytes of the local pack, its records
read by range from the source; once the shards are published the reads are
local; a corrupt byte in a remote record is caught by its checksum."""
import datetime
import json
import struct

import pytest

from conftest import STOKER, run, wait_for
from test_staging import metric, pack_bytes, served, s3, start, stream  # noqa: F401


def record_range(dataset, shard, i):
    """(offset, length) of record i of `shard` (its record index)."""
    raw = (dataset / f"shard-{shard:05d}.idx").read_bytes()
    offset, length = struct.unpack_from("<QQ", raw, 24 + 16 * i)
    return offset, length


def slow(proxy, dataset, seconds):
    """A link that needs about `seconds` for the whole pack, 20 ms away."""
    proxy.faults.latency = 0.02
    proxy.faults.rate = max(1, pack_bytes(dataset) // seconds)


# The copy one small GET at a time, and records read one by one: a block
# (storage.read_block) would bring a whole shard of this small pack.
COPY_ONE_AT_A_TIME = ("storage: {parallel: 1, chunk_size: 64KiB, "
                      "read_block: 0}\n")


def logged_at(d, event, dataset):
    """When the daemon logged its first `event` line for `dataset` (seconds
    since the epoch), or None."""
    for line in d.log().splitlines():
        fields = line.split(" ")
        if f"event={event}" in fields and f"dataset={dataset}" in fields:
            ts = line.split(" ", 1)[0].removeprefix("ts=")
            return datetime.datetime.strptime(
                ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                    tzinfo=datetime.timezone.utc).timestamp()
    return None


def assert_served_before_the_copy_ended(d, got):
    """The stream's first batch came before the copy of its dataset ended.
    Its open plus the client's time to the first batch (counted from before
    the open) bounds the batch from above. (Whether the last batch, too,
    comes before the copy ends depends on the machine's load: on shards
    smaller than a piece, a read waits for the copy's piece.)"""
    opened = logged_at(d, "stream_open", "train")
    assert opened is not None, d.log()
    ended = logged_at(d, "stage_end", "train")
    if ended is not None:
        assert opened + got["first_batch_seconds"] < ended, d.log()


def test_a_stream_is_served_while_the_copy_runs_then_from_local(
        tmp_path, served, dataset):
    proxy, _ = served
    slow(proxy, dataset, 10)
    d = start(tmp_path, {
        "train": f"{{path: {tmp_path / 'staged'}, "
                 f"source: {proxy.url}/d/train}}",
        "local": f"{{path: {dataset}}}"}, COPY_ONE_AT_A_TIME)
    try:
        got = stream(d, "train", True, 60)
        # Served, whole, from the source while the copy ran.
        assert_served_before_the_copy_ended(d, got)
        assert got["status"] == "OK" and got["samples"] == 30
        assert got["content_digest"] == stream(d, "local")["content_digest"]
        remote = metric(d, "stoker_source_records_total", "train")
        assert remote and remote > 0
        assert metric(d, "stoker_source_requests_total", "train") > 0
        top = json.loads(run([STOKER, "top", "--once", "--json", "--address",
                              d.address, "--interval", "0.2"]).stdout)
        row = [s for s in top["staging"] if s["dataset"] == "train"][0]
        assert row["servable"] and row["remote_records"] == remote
        # Once every shard is published, nothing more is read by range.
        proxy.faults.rate = 0
        assert wait_for(
            lambda: metric(d, "stoker_stage_complete", "train") == 1, 120)
        again = stream(d, "train")
        assert again["content_digest"] == got["content_digest"]
        assert metric(d, "stoker_source_records_total", "train") == remote
    finally:
        d.stop()


@pytest.mark.parametrize("on_corrupt", ["fail", "skip"])
def test_a_corrupt_byte_in_a_remote_record_is_caught(tmp_path, served,
                                                    dataset, on_corrupt):
    proxy, _ = served
    # Slow enough that the stream reads shard 1 long before the copy
    # fetches it (twice, then fails its digest).
    slow(proxy, dataset, 30)
    offset, length = record_range(dataset, 1, 0)
    proxy.faults.corrupt["shard-00001.lmdb"] = offset + length // 2
    d = start(tmp_path, {
        "train": f"{{path: {tmp_path / 'staged'}, "
                 f"source: {proxy.url}/d/train}}"},
        COPY_ONE_AT_A_TIME + f"on_corrupt: {on_corrupt}\n")
    try:
        r = stream(d, "train", False, 60)
        out = r.stdout + r.stderr
        if on_corrupt == "fail":
            assert r.returncode != 0
            assert "DATA_LOSS" in out and "dataset 'train'" in out
            assert "shard shard-00001.lmdb, key" in out
            assert f"{proxy.url}/d/train/shard-00001.lmdb" in out
            assert "checksum" in out
        else:
            assert r.returncode == 0, r.stderr
            result = json.loads(r.stdout)
            assert result["skipped_samples"] == 1
            assert result["samples"] == 29
        assert metric(d, "stoker_source_refetches_total", "train") >= 1
    finally:
        d.stop()


def test_served_while_staging_from_s3(tmp_path, s3, dataset, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.url)
    run([STOKER, "push", dataset, "s3://data/packs/train"])
    slow(s3, dataset, 10)
    d = start(tmp_path, {
        "train": f"{{path: {tmp_path / 'staged'}, "
                 "source: \"s3://data/packs/train\"}",
        "local": f"{{path: {dataset}}}"}, COPY_ONE_AT_A_TIME)
    try:
        got = stream(d, "train", True, 60)
        assert_served_before_the_copy_ended(d, got)
        assert got["content_digest"] == stream(d, "local")["content_digest"]
        assert metric(d, "stoker_source_records_total", "train") > 0
    finally:
        d.stop()


@pytest.mark.parametrize("ahead", [0, 29])
def test_storage_read_ahead_sets_the_batches_fetched_ahead(tmp_path, served,
                                                          dataset, ahead):
    proxy, _ = served
    slow(proxy, dataset, 30)
    d = start(tmp_path, {
        "train": f"{{path: {tmp_path / 'staged'}, "
                 f"source: {proxy.url}/d/train}}"},
        f"storage: {{parallel: 1, chunk_size: 64KiB, read_ahead: {ahead}, "
        "read_block: 0}\n")
    try:
        run([STOKER, "stream", "--address", d.address, "--dataset", "train",
             "--pipeline", "train", "--batch-size", 1, "--max-batches", 1,
             "--prefetch", 1, "--quiet", "--open-timeout", 60])

        def gets():
            return metric(d, "stoker_source_requests_total", "train") or 0
        # The copy, one piece at a time, holds the first shard for seconds;
        # the reads of its records wait for it rather than fetch them.
        if ahead:
            # The whole epoch's plan (30 batches of one record) is asked
            # for: a GET for each record of the two other shards.
            assert wait_for(lambda: gets() >= 10, 60), gets()
        else:
            # Only the records of the batches the stream built: the one
            # asked for and the few a stream builds ahead of it.
            assert gets() <= 4
        assert metric(d, "stoker_stage_complete", "train") == 0
    finally:
        d.stop()
