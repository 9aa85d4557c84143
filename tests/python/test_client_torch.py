"""stoker.torch.Loader against a real stokerd: tensors, epochs, len(),
state_dict resume, and the distributed context."""
import warnings

import pytest
import torch

import stoker
from stoker import sampling
from stoker.torch import Loader


def loader(daemon, **kwargs):
    args = dict(dataset="train", pipeline="train", batch_size=4, seed=5,
                rank=0, world_size=1, job_id="")
    args.update(kwargs)
    return Loader(daemon.address, **args)


def content(batches):
    """Each batch as (epoch, step, ids, bytes of every tensor)."""
    return [(b.epoch, b.step, tuple(b.sample_ids),
             tuple(t.numpy().tobytes() for t in b.values())) for b in batches]


def run_epochs(ld, epochs):
    out = []
    for _ in range(epochs):
        out += list(ld)
    return out


def test_yields_dicts_of_cpu_tensors_without_warnings(client_daemon):
    expect = {"train": (torch.float32, (3, 32, 32)),
              "half": (torch.float16, (20, 20, 3)),
              "bytes": (torch.uint8, (16, 16, 3))}
    for pipeline, (dtype, shape) in expect.items():
        with loader(client_daemon, pipeline=pipeline) as ld, \
                warnings.catch_warnings():
            warnings.simplefilter("error")
            batch = next(iter(ld))
            assert isinstance(batch, dict) and list(batch) == ["image", "label"]
            assert batch["image"].dtype == dtype
            assert batch["image"].shape == (4,) + shape
            assert batch["label"].dtype == torch.int64
            assert batch["image"].device.type == "cpu"
            assert (batch.epoch, batch.step) == (0, 0)
            assert len(batch.sample_ids) == 4
            batch["image"].mul_(2)  # Writable in place.
            assert ld.transport == "shm"  # auto, on a unix socket.


def test_each_for_loop_is_one_epoch_like_a_stream_of_many(client_daemon):
    ld = loader(client_daemon)
    assert len(ld) == 8
    got = run_epochs(ld, 3)
    assert [(b.epoch, b.step) for b in got] == [
        (e, s) for e in range(3) for s in range(8)]
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "train", batch_size=4, seed=5, epochs=3) as s:
        want = [(b.epoch, b.step, tuple(b.sample_ids),
                 tuple(a.tobytes() for a in b.values())) for b in s]
    assert content(got) == want
    # The stream stayed open across epochs.
    assert ld.stream is not None and ld.position == (3, 0)
    ld.close()


def test_a_loop_left_early_continues_its_epoch(client_daemon):
    ld = loader(client_daemon, epochs=2)
    whole = content(run_epochs(loader(client_daemon, epochs=2), 3))
    first = []
    for batch in ld:
        first.append(batch)
        if len(first) == 3:
            break
    assert ld.position == (0, 3)
    rest = run_epochs(ld, 3)  # The third `for` is past `epochs`: empty.
    assert content(first + rest) == whole
    assert len(whole) == 16 and ld.position == (2, 0)
    ld.set_epoch(0)
    assert [b.step for b in ld] == list(range(8))


def test_set_epoch_keeps_a_resumed_epoch(client_daemon):
    ld = loader(client_daemon, start=(1, 5))
    ld.set_epoch(1)
    assert [(b.epoch, b.step) for b in ld] == [(1, 5), (1, 6), (1, 7)]
    ld.set_epoch(4)
    assert ld.position == (4, 0)
    assert next(iter(ld)).epoch == 4
    ld.close()


@pytest.mark.parametrize("stop_after", [5, 8, 11])
def test_state_dict_resumes_at_the_exact_batch(client_daemon, stop_after):
    # 5: mid-epoch 0; 8: exactly at the boundary; 11: mid-epoch 1. The
    # resumed loader goes on across the following epoch boundaries.
    kwargs = dict(pipeline="half", batch_size=3, seed=9, epochs=3)
    whole = content(run_epochs(loader(client_daemon, **kwargs), 3))
    assert len(whole) == 30

    first = loader(client_daemon, **kwargs)
    head = []
    while len(head) < stop_after:
        for batch in first:
            head.append(batch)
            if len(head) == stop_after:
                break
    state = first.state_dict()
    first.close()
    assert state["position"] == {"epoch": stop_after // 10,
                                 "step": stop_after % 10}

    resumed = loader(client_daemon, **kwargs)
    resumed.load_state_dict(state)
    tail = run_epochs(resumed, 3 - stop_after // 10)
    assert content(head) == whole[:stop_after]
    assert content(tail) == whole[stop_after:]


def test_load_state_dict_refuses_another_stream(client_daemon):
    state = loader(client_daemon, seed=1, batch_size=4).state_dict()
    with pytest.raises(ValueError) as e:
        loader(client_daemon, seed=2, drop_last=True).load_state_dict(state)
    assert "seed 1 in the state, 2 here" in str(e.value)
    assert "drop_last False in the state, True here" in str(e.value)
    with pytest.raises(ValueError):
        loader(client_daemon, seed=1, pipeline="half").load_state_dict(state)
    # Another batch size is another layout, not another stream: see
    # test_client_resize.py.
    loader(client_daemon, seed=1, batch_size=5).load_state_dict(state)
    with pytest.raises(ValueError):
        loader(client_daemon, seed=1).load_state_dict({"position": [0, 1]})
    # The dataset changed size since the state was saved.
    ld = loader(client_daemon, seed=1)
    ld.load_state_dict(dict(state, num_samples=31))
    with pytest.raises(ValueError) as e:
        next(iter(ld))
    assert "31 samples" in str(e.value) and "30 now" in str(e.value)


def test_a_state_from_rank_zero_resumes_every_rank(client_daemon):
    # B=7, W=4, N=30: one full global step, then a tail of 2 that ranks 0
    # and 1 take; ranks 2 and 3 have one step fewer.
    kwargs = dict(batch_size=7, world_size=4, job_id="j", epochs=2)
    rank0 = loader(client_daemon, rank=0, **kwargs)
    assert len(rank0) == 2
    next(iter(rank0))
    state = rank0.state_dict()
    rank0.close()
    assert state["position"] == {"epoch": 0, "step": 1}
    for rank in range(4):
        ld = loader(client_daemon, rank=rank, **kwargs)
        ld.load_state_dict(state)
        got = []
        for epoch in range(2):  # As a DDP training loop does.
            ld.set_epoch(epoch)
            got.append([b.position for b in ld])
        if rank < 2:
            assert got == [[(0, 1)], [(1, 0), (1, 1)]]
        else:
            # Nothing is left of epoch 0: its `for` is empty, and epoch 1
            # comes once, in its own `for`.
            assert len(ld) == 1 and got == [[], [(1, 0)]]


def test_len_agrees_with_the_daemons_header(client_daemon):
    client = stoker.Client(client_daemon.address)
    n = client.dataset("train").num_samples
    checked = 0
    for batch_size in (1, 4, 7, 11, 16, 30, 31):
        for world in (1, 2, 3, 4):
            for drop_last in (False, True):
                for rank in range(world):
                    steps = sampling.steps_per_epoch(n, batch_size, world,
                                                     rank, drop_last)
                    samples = sampling.samples_per_epoch(
                        n, batch_size, world, rank, drop_last)
                    try:
                        s = client.stream("train", "bytes", batch_size,
                                          rank=rank, world_size=world,
                                          drop_last=drop_last, prefetch=1,
                                          transport="grpc")
                    except stoker.InvalidArgument:
                        assert steps == 0, (batch_size, world, rank, drop_last)
                        continue
                    with s:
                        assert s.info.steps_per_epoch == steps
                        assert s.info.samples_per_epoch == samples
                    checked += 1
    assert checked > 50
    ld = loader(client_daemon, batch_size=7, world_size=4, rank=3)
    assert len(ld) == 1
    next(iter(ld))
    assert len(ld) == ld.stream.info.steps_per_epoch == 1
    ld.close()


def test_rank_world_and_job_come_from_the_environment(client_daemon,
                                                      monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "run-7")
    ld = Loader(client_daemon.address, "train", "train", batch_size=4)
    assert (ld.rank, ld.world_size, ld.job_id) == (1, 3, "run-7")
    assert len(ld) == sampling.steps_per_epoch(30, 4, 3, 1)
    ld = Loader(client_daemon.address, "train", "train", batch_size=4, rank=2,
                job_id="mine")
    assert (ld.rank, ld.world_size, ld.job_id) == (2, 3, "mine")


def test_bad_local_arguments_raise_value_error():
    with pytest.raises(ValueError):
        Loader("unix:/nonexistent.sock", "train", "train", 4, transport="x")
    with pytest.raises(ValueError):
        Loader("unix:/nonexistent.sock", "train", "train", -4)
    with pytest.raises(ValueError):
        Loader("unix:/nonexistent.sock", "train", "train", 4, device="meta")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_device_gets_the_same_values(client_daemon):
    cpu = next(iter(loader(client_daemon, pipeline="half")))
    gpu = next(iter(loader(client_daemon, pipeline="half", device="cuda")))
    for name in cpu:
        assert gpu[name].device.type == "cuda"
        assert torch.equal(gpu[name].cpu(), cpu[name])
