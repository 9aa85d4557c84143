"""The Python client's Stream against a real stokerd: same bytes as the C++
client, tensor views, positions, acks, transports and errors."""
import json
import re

import numpy as np
import pytest
import xxhash

import stoker
from stoker import transports
from conftest import STOKER, run


def cli_stream(daemon, *args):
    out = run([STOKER, "stream", "--address", daemon.address, "--json",
               "--quiet", *args])
    return json.loads(out.stdout.strip().splitlines()[-1])


def digest(batches):
    h = xxhash.xxh3_64()
    for batch in batches:
        for array in batch.values():
            h.update(array)
    return h.hexdigest()


@pytest.mark.parametrize("pipeline,args", [
    ("train", dict(batch_size=4, seed=3, epochs=2)),
    ("half", dict(batch_size=5, seed=1)),
    ("bytes", dict(batch_size=3, seed=2, rank=1, world_size=2, drop_last=True)),
])
def test_digest_matches_the_cli_for_the_same_request(client_daemon, pipeline,
                                                     args):
    client = stoker.Client(client_daemon.address)
    with client.stream("train", pipeline, transport="grpc", **args) as s:
        batches = list(s)
    cli = cli_stream(
        client_daemon, "--dataset", "train", "--pipeline", pipeline,
        "--batch-size", args["batch_size"], "--seed", args["seed"],
        "--epochs", args.get("epochs", 1), "--rank", args.get("rank", 0),
        "--world-size", args.get("world_size", 1),
        *(["--drop-last"] if args.get("drop_last") else []))
    assert digest(batches) == cli["content_digest"]
    assert len(batches) == cli["batches"]
    assert sum(len(b.sample_ids) for b in batches) == cli["samples"]
    assert s.position == (cli["next_position"]["epoch"],
                          cli["next_position"]["step"])


def test_cli_end_position_streams_only_the_chunk(client_daemon):
    # 30 samples, batches of 4: 8 steps per epoch. The chunk (0, 6) to
    # (1, 2) is the whole two-epoch stream's batches 6..9, byte for byte.
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "train", batch_size=4, seed=3, epochs=2,
                       transport="grpc") as s:
        whole = list(s)
    cli = cli_stream(client_daemon, "--dataset", "train", "--pipeline",
                     "train", "--batch-size", 4, "--seed", 3, "--epochs", 2,
                     "--start-epoch", 0, "--start-step", 6, "--end-epoch", 1,
                     "--end-step", 2)
    assert cli["batches"] == 4
    assert cli["content_digest"] == digest(whole[6:10])
    assert cli["next_position"] == {"epoch": 1, "step": 2}


def test_batches_are_typed_read_only_views_of_the_message(client_daemon):
    client = stoker.Client(client_daemon.address)
    expect = {
        "train": ({"image": (np.float32, (3, 32, 32)),
                   "label": (np.int64, ())}),
        "half": ({"image": (np.float16, (20, 20, 3)),
                  "label": (np.int64, ())}),
        "bytes": ({"image": (np.uint8, (16, 16, 3)),
                   "label": (np.int64, ())}),
    }
    for pipeline, tensors in expect.items():
        with client.stream("train", pipeline, batch_size=4,
                           transport="grpc") as s:
            assert [(o.name, o.dtype, o.shape) for o in s.info.outputs] == [
                (k, np.dtype(d), shape) for k, (d, shape) in tensors.items()]
            batch = next(s)
        assert list(batch) == list(tensors)
        for name, (dtype, shape) in tensors.items():
            array = batch[name]
            assert array.dtype == dtype
            assert array.shape == (4,) + shape
            assert not array.flags.writeable
            # A view of the received bytes, not a copy.
            base = array
            while isinstance(base, np.ndarray):
                base = base.base
            assert isinstance(base, bytes) and len(base) > batch.nbytes
        assert np.all((batch["label"] >= 0) & (batch["label"] < 3))
        assert len(batch.sample_ids) == 4 and batch.skipped_ids == []
        assert (batch.epoch, batch.step) == (0, 0)


def test_position_and_info_follow_the_batches(client_daemon):
    client = stoker.Client(client_daemon.address)
    s = client.stream("train", "train", batch_size=4, epochs=2, start=(0, 6))
    assert s.info.steps_per_epoch == 8
    assert s.info.samples_per_epoch == 30
    assert s.info.num_samples == 30
    assert s.info.prefetch == 4
    assert s.info.start == (0, 6)
    assert s.position == (0, 6)
    seen = []
    for batch in s:
        seen.append(batch.position)
        if len(seen) == 3:
            assert s.position == (1, 1)
    assert seen == [(0, 6), (0, 7)] + [(1, step) for step in range(8)]
    assert s.position == (2, 0)
    assert s.closed
    assert list(s) == []


def test_acks_flow_while_reading_with_prefetch_one(client_daemon):
    # The daemon sends nothing past `prefetch` unacknowledged batches, so
    # with prefetch 1 the stream stalls unless every ack arrives.
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "bytes", batch_size=2, epochs=3,
                       prefetch=1, transport="grpc") as s:
        assert s.info.prefetch == 1
        ids = [i for batch in s for i in batch.sample_ids]
    assert len(ids) == 90
    for epoch in range(3):
        assert sorted(ids[epoch * 30:(epoch + 1) * 30]) == list(range(30))


def test_auto_ends_on_grpc_for_a_tcp_address_and_says_so(client_daemon,
                                                          monkeypatch):
    # shm is for a daemon on this node (a unix socket): as for a TCP
    # address, auto then tries grpc only.
    monkeypatch.setattr(transports.ShmTransport, "suits",
                        classmethod(lambda cls, address, cuda_device: False))
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "train", batch_size=4) as s:
        assert s.transport == "grpc" and s.info.transport == "grpc"
        assert s.transport_attempts == [("grpc", None)]
        assert len(list(s)) == 8


def test_auto_falls_back_when_a_transport_is_refused(client_daemon,
                                                     monkeypatch):
    # As auto does for a consumer on a GPU: the client (without CUDA here)
    # or the daemon refuses cuda_ipc with FAILED_PRECONDITION, and the
    # stream goes on with the next candidate.
    monkeypatch.setattr(transports.CudaIpcTransport, "unavailable",
                        classmethod(lambda cls, cuda_device: "no GPU here"))
    monkeypatch.setattr(transports, "candidates",
                        lambda name, address, cuda_device: ["cuda_ipc",
                                                            "grpc"])
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "train", batch_size=4, seed=3) as s:
        assert s.transport == "grpc"
        (first, refusal), second = s.transport_attempts
        assert first == "cuda_ipc" and "FAILED_PRECONDITION" in refusal
        assert second == ("grpc", None)
        fallback = digest(s)
    with client.stream("train", "train", batch_size=4, seed=3,
                       transport="grpc") as s:
        assert digest(s) == fallback


def test_transports_this_process_cannot_use_fail_before_sending(
        monkeypatch):
    # No daemon listens here: nothing is sent. (test_client_cuda.py has
    # each of cuda_ipc's reasons.)
    monkeypatch.setattr(transports.CudaIpcTransport, "unavailable",
                        classmethod(lambda cls, cuda_device: "no GPU here"))
    client = stoker.Client("unix:/nonexistent/stoker.sock")
    for transport in ("cuda_ipc",):
        with pytest.raises(stoker.FailedPrecondition) as e:
            client.stream("train", "train", batch_size=4, transport=transport)
        assert e.value.code.name == "FAILED_PRECONDITION"
        assert "no GPU here" in e.value.message
        assert "'grpc'" in e.value.message


def test_bad_requests_raise_the_daemons_status(client_daemon):
    client = stoker.Client(client_daemon.address)
    with pytest.raises(stoker.NotFound) as e:
        client.stream("nope", "train", batch_size=4)
    assert "'nope'" in e.value.message and isinstance(e.value,
                                                      stoker.StokerError)
    with pytest.raises(stoker.NotFound):
        client.stream("train", "nope", batch_size=4)
    with pytest.raises(stoker.InvalidArgument) as e:
        client.stream("train", "train", batch_size=0)
    assert "batch_size" in e.value.message
    with pytest.raises(stoker.InvalidArgument):
        client.stream("train", "train", batch_size=4, rank=2, world_size=2)
    with pytest.raises(stoker.InvalidArgument) as e:
        client.stream("train", "train", batch_size=4, start=(0, 8))
    assert "start position" in e.value.message
    with pytest.raises(stoker.ResourceExhausted):
        client.stream("train", "train", batch_size=4000, prefetch=64)


@pytest.mark.parametrize("kwargs", [
    dict(transport="foo"), dict(batch_size=-1), dict(batch_size=2.5),
    dict(seed=-3), dict(prefetch=1 << 40), dict(start=(1,)),
    dict(start=(0, -1)), dict(reconnect_timeout=-1), dict(job_id=7),
])
def test_bad_local_arguments_raise_value_error_before_sending(kwargs):
    # No daemon listens here: these must fail before any connection.
    client = stoker.Client("unix:/nonexistent/stoker.sock")
    args = dict(dataset="train", pipeline="train", batch_size=4)
    args.update(kwargs)
    with pytest.raises(ValueError):
        client.stream(**args)


def test_lists_datasets_and_pipelines(client_daemon):
    client = stoker.Client(client_daemon.address)
    [train] = client.datasets()
    assert train.name == "train" and train.num_samples == 30
    assert train.classes == ("class_000", "class_001", "class_002")
    assert re.fullmatch("[0-9a-f]{16}", train.manifest_digest)
    assert re.fullmatch("[0-9a-f]{16}", train.content_digest)
    assert client.dataset("train") == train
    with pytest.raises(stoker.NotFound):
        client.dataset("nope")
    pipelines = {p.name: p for p in client.pipelines()}
    assert set(pipelines) == {"train", "half", "bytes"}
    assert pipelines["train"].ops[:2] == ("decode_jpeg", "random_resized_crop")
    # The outputs on the daemon's one dataset, as a stream's header has them.
    half = {o.name: o for o in pipelines["half"].outputs}
    assert half["image"].dtype == np.float16
    assert half["image"].shape == (20, 20, 3)
    with client.stream("train", "half", batch_size=2) as s:
        assert pipelines["half"].outputs == s.info.outputs


def test_close_ends_iteration(client_daemon):
    client = stoker.Client(client_daemon.address)
    s = client.stream("train", "train", batch_size=2, epochs=0)
    next(s)
    s.close()
    s.close()
    assert list(s) == []
    assert s.position == (0, 1)


def test_wire_parser_agrees_with_protobuf_and_leaves_the_payload_in_place():
    from stoker._proto.stoker.v1 import stoker_pb2 as pb
    from stoker._wire import parse_response
    batch = pb.Batch(epoch=3, step=9, sample_ids=[5, 1 << 40, 0],
                     skipped_ids=[7], slot=2, payload=bytes(range(200)) * 3)
    batch.tensors.add(name="x", dtype=pb.DTYPE_FLOAT16, shape=[3, 4],
                      offset=8, length=24)
    raw = pb.StreamResponse(batch=batch).SerializeToString()
    got = parse_response(raw)
    assert got.header is None and got.raw is raw
    start, size = got.payload_offset, got.payload_length
    assert raw[start:start + size] == batch.payload
    got.batch.payload = batch.payload
    assert got.batch == batch
    # Fields after the payload (protobuf allows any order) still parse.
    meta = pb.Batch(epoch=3, step=9, sample_ids=[5])
    odd = (pb.Batch(payload=b"abc").SerializeToString() +
           meta.SerializeToString())
    raw = bytes([0x12, len(odd)]) + odd  # StreamResponse.batch, by hand.
    got = parse_response(raw)
    assert got.batch == meta
    assert raw[got.payload_offset:][:got.payload_length] == b"abc"
    header = pb.StreamHeader(num_samples=30, steps_per_epoch=8)
    got = parse_response(pb.StreamResponse(header=header).SerializeToString())
    assert got.header == header and got.batch is None
    empty = parse_response(
        pb.StreamResponse(batch=pb.Batch()).SerializeToString())
    assert empty.batch == pb.Batch() and empty.payload_length == 0
