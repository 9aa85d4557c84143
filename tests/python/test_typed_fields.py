"""Typed fields end to end with the Python client (docs/pipeline-design.md
§4): a dataset of every pass-through kind (typed_data.py, the twin of the
C++ fixture) through a stokerd over grpc and shm, every value compared with
its record: ragged fields as stoker.Ragged, a corrupt record skipped (the
daemon then compacts the ragged batch around it), ragged_limit's overflow
policies, drop_fields, the torch Loader, and `stoker stream --json`'s
digest over every packed tensor."""

import json

import numpy as np
import pytest
import xxhash

import stoker
from conftest import STOKER, Daemon, run, write_config
from typed_data import typed_samples, write_typed_dataset

N = 40
CORRUPT = 7

PIPELINES = """\
  raw:
    - drop_fields: []
  nocap:
    - drop_fields: [caption, patch]
  truncate:
    - ragged_limit: {field: tokens, max_length: 5, overflow: truncate}
  skip:
    - ragged_limit: {field: tokens, max_length: 5, overflow: skip}
  fail:
    - ragged_limit: {field: tokens, max_length: 5, overflow: fail}
  cut:
    - ragged_limit: {field: caption, max_length: 9, overflow: truncate}
"""


def serve(tmp_path, corrupt=False):
    schema, records = typed_samples(N)
    data = write_typed_dataset(tmp_path / "typed", schema, records)
    if corrupt:
        shard = data / "shard-00000.lmdb"
        raw = bytearray(shard.read_bytes())
        at = raw.find(records[CORRUPT][0])
        assert at > 0 and raw.find(records[CORRUPT][0], at + 1) < 0
        raw[at + len(records[CORRUPT][0]) // 2] ^= 0x5A
        shard.write_bytes(bytes(raw))
    socket = tmp_path / "stoker.sock"
    config = write_config(tmp_path / "stoker.yaml", data, socket,
                          PIPELINES + "on_corrupt: skip\n")
    return Daemon(config, socket).start(), records


@pytest.fixture
def typed(tmp_path):
    daemon, records = serve(tmp_path)
    yield daemon, records
    daemon.stop()


def check(batch, records, max_tokens=1000, caption=True):
    n = len(batch.sample_ids)
    tokens = batch["tokens"]
    assert isinstance(tokens, stoker.Ragged)
    assert len(tokens) == n and not tokens.utf8
    assert tokens.values.dtype == np.int32
    assert "tokens.offsets" not in batch
    for k, i in enumerate(batch.sample_ids):
        r = records[i]
        row = tokens[k]
        assert isinstance(row, np.ndarray)
        assert row.tobytes() == r[0][:4 * max_tokens]
        assert batch["label"][k] == i
        assert batch["score"][k].tobytes() == r[2]
        assert batch["weight"][k].tobytes() == r[3]
        if caption:
            assert batch["patch"][k].tobytes() == r[4]
            assert batch["caption"][k] == r[5].decode()
    if not caption:
        assert "caption" not in batch and "patch" not in batch


def read(daemon, pipeline, transport, records, **kw):
    client = stoker.Client(daemon.address)
    ids, skipped = [], []
    with client.stream("train", pipeline, batch_size=8, seed=3,
                       transport=transport) as s:
        for batch in s:
            check(batch, records, **kw)
            ids += batch.sample_ids
            skipped += batch.skipped_ids
            batch.release()
    return sorted(ids), sorted(skipped)


@pytest.mark.parametrize("transport", ["grpc", "shm"])
def test_every_kind_arrives_byte_exact(typed, transport):
    daemon, records = typed
    assert read(daemon, "raw", transport, records) == (list(range(N)), [])


def test_a_corrupt_record_is_skipped_and_the_batch_compacted(tmp_path):
    daemon, records = serve(tmp_path, corrupt=True)
    try:
        for transport in ("grpc", "shm"):
            ids, skipped = read(daemon, "raw", transport, records)
            assert skipped == [CORRUPT]
            assert ids == [i for i in range(N) if i != CORRUPT]
    finally:
        daemon.stop()


def test_ragged_limit_truncates_skips_or_fails(typed):
    daemon, records = typed
    assert read(daemon, "truncate", "grpc", records,
                max_tokens=5) == (list(range(N)), [])
    long = [i for i in range(N) if (5 * i) % 13 > 5]
    ids, skipped = read(daemon, "skip", "shm", records, max_tokens=5)
    assert skipped == long
    assert ids == [i for i in range(N) if i not in long]
    with pytest.raises(stoker.ResourceExhausted, match="ragged_limit"):
        read(daemon, "fail", "grpc", records, max_tokens=5)


def test_drop_fields_and_what_the_daemon_says_of_outputs(typed):
    daemon, records = typed
    assert read(daemon, "nocap", "grpc", records,
                caption=False) == (list(range(N)), [])
    client = stoker.Client(daemon.address)
    outputs = {p.name: p.outputs for p in client.pipelines()}
    raw = {o.name: o for o in outputs["raw"]}
    assert raw["tokens"].shape == (-1,)
    assert raw["tokens.offsets"].offsets_for == "tokens"
    assert raw["caption"].utf8 and not raw["tokens"].utf8


def test_ragged_rows_bytes_and_text():
    values = np.frombuffer(b"abcdef", dtype=np.uint8)
    offsets = np.array([0, 2, 2, 6], dtype=np.int64)
    assert list(stoker.Ragged(values, offsets)) == [b"ab", b"", b"cdef"]
    assert stoker.Ragged(values, offsets, utf8=True)[-1] == "cdef"
    rows = stoker.Ragged(np.arange(12, dtype=np.float32).reshape(6, 2),
                         offsets)
    assert rows[2].shape == (4, 2) and rows[2][0, 0] == 4
    with pytest.raises(IndexError):
        rows[3]


def test_the_torch_loader_gives_a_ragged_field_as_two_tensors(typed):
    pytest.importorskip("torch")
    import stoker.torch
    daemon, records = typed
    loader = stoker.torch.Loader(daemon.address, "train", "raw",
                                 batch_size=8, seed=3, epochs=1)
    seen = []
    for batch in loader:
        tokens, offsets = batch["tokens"], batch["tokens.offsets"]
        assert offsets.shape == (len(batch.sample_ids) + 1,)
        for k, i in enumerate(batch.sample_ids):
            row = tokens[int(offsets[k]):int(offsets[k + 1])]
            assert row.numpy().tobytes() == records[i][0]
        seen += batch.sample_ids
    assert sorted(seen) == list(range(N))


@pytest.mark.parametrize("transport", ["grpc", "shm"])
def test_the_cli_digest_covers_every_packed_tensor(typed, transport):
    daemon, _ = typed
    h = xxhash.xxh3_64()
    client = stoker.Client(daemon.address)
    with client.stream("train", "raw", batch_size=8, seed=3,
                       transport="grpc") as s:
        for batch in s:
            for value in batch.values():  # In wire order; ragged: values,
                if isinstance(value, stoker.Ragged):  # then offsets.
                    h.update(value.values)
                    h.update(value.offsets)
                else:
                    h.update(value)
    out = run([STOKER, "stream", "--address", daemon.address, "--json",
               "--quiet", "--dataset", "train", "--pipeline", "raw",
               "--batch-size", 8, "--seed", 3, "--transport", transport])
    cli = json.loads(out.stdout.strip().splitlines()[-1])
    assert cli["content_digest"] == h.hexdigest()
    assert cli["samples"] == N


def test_truncate_cuts_a_str_at_a_character_boundary(typed):
    # Every caption starts "caption é": its 9th byte is the first of the
    # two of 'é', so a cut there keeps the 8 before it.
    daemon, records = typed
    client = stoker.Client(daemon.address)
    seen = 0
    with client.stream("train", "cut", batch_size=8, seed=3) as s:
        for batch in s:
            for k in range(len(batch.sample_ids)):
                assert batch["caption"][k] == "caption "
            seen += len(batch.sample_ids)
            batch.release()
    assert seen == N
