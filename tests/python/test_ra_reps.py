"""Repeated augmentation (ra_reps, docs/pipeline-design.md section 4.5)
through stokerd: an epoch is each of the N samples k times, (id, rep)
exactly once over the ranks, entry j of the epoch on rank j % W, each copy
augmented differently and reproducibly; the Python client's counts, the
Loader's resume and `stoker stream --ra-reps` agree with the daemon."""
import collections
import json

import numpy as np
import pytest

from conftest import STOKER, run
from stoker import Client, StreamRequest, errors, sampling
from stoker.stream import Stream
from stoker.torch import Loader

N = 30  # The session dataset's samples.


def entries(client, k, world, batch, job, drop_last=False, epoch=0):
    """Each rank's (id, rep, image bytes) of `epoch`, in order."""
    out = []
    streams = [client.stream("train", "bytes", batch, seed=5, epochs=epoch + 1,
                             rank=r, world_size=world, job_id=job,
                             drop_last=drop_last, ra_reps=k,
                             transport="grpc", start=(epoch, 0))
               for r in range(world)]
    for s in streams:
        got = []
        with s:
            for b in s:
                # Reps travel only with ra_reps > 1.
                reps = b.sample_reps if k > 1 else [0] * len(b.sample_ids)
                assert len(reps) == len(b.sample_ids) == len(b["image"])
                assert k > 1 or b.sample_reps == []
                got += [(i, rep, b["image"][n].tobytes()) for n, (i, rep)
                        in enumerate(zip(b.sample_ids, reps))]
        out.append(got)
    return out


def interleave(per_rank, world):
    """The epoch's entries in epoch order: entry j is rank j % W's
    (j // W)-th."""
    total = sum(len(r) for r in per_rank)
    return [per_rank[j % world][j // world] for j in range(total)]


@pytest.mark.parametrize("k,world,batch", [(3, 2, 4), (2, 4, 2), (4, 2, 5)])
def test_each_copy_once_entry_j_on_rank_j_mod_w(client_daemon, k, world,
                                                batch):
    with Client(client_daemon.address) as client:
        per_rank = entries(client, k, world, batch, f"ra{k}{world}{batch}")
        for r, got in enumerate(per_rank):
            assert len(got) == sampling.samples_per_epoch(N, batch, world, r,
                                                          False, k)
        epoch = interleave(per_rank, world)
        assert len(epoch) == N * k
        # E[j] = (p[j // k], j % k) for a permutation p of the samples.
        assert [rep for _, rep, _ in epoch] == [j % k for j in range(N * k)]
        order = [epoch[j][0] for j in range(0, N * k, k)]
        assert sorted(order) == list(range(N))
        assert [i for i, _, _ in epoch] == [order[j // k]
                                            for j in range(N * k)]
        # The copies of a sample are augmented differently.
        copies = collections.defaultdict(set)
        for i, _, image in epoch:
            copies[i].add(image)
        differ = sum(len(c) == k for c in copies.values())
        assert differ >= N - 2, f"only {differ} of {N} samples' copies differ"


def test_copies_are_reproducible_and_ra_reps_1_is_todays_stream(
        client_daemon):
    with Client(client_daemon.address) as client:
        first = entries(client, 2, 2, 4, "same-a")
        again = entries(client, 2, 2, 4, "same-b")
        assert first == again
        plain = entries(client, 1, 1, 4, "plain-a")[0]
        default = []
        with client.stream("train", "bytes", 4, seed=5, job_id="plain-b",
                           transport="grpc") as s:
            for b in s:
                assert b.sample_reps == []
                default += [(i, 0, b["image"][n].tobytes())
                            for n, i in enumerate(b.sample_ids)]
        assert plain == default
        # Copy 0 of ra_reps 2 is the sample as ra_reps 1 augments it: the
        # rep enters the generator only above 0.
        zero = {i: image for r in first for i, rep, image in r if rep == 0}
        assert zero == {i: image for i, _, image in plain}


def test_the_daemon_counts_match_the_client_and_drop_last(client_daemon):
    with Client(client_daemon.address) as client:
        for k, world, batch, drop in [(3, 4, 7, False), (3, 4, 7, True),
                                      (2, 3, 8, False), (5, 2, 16, True)]:
            for r in range(world):
                with client.stream("train", "bytes", batch, rank=r,
                                   world_size=world, ra_reps=k,
                                   drop_last=drop, transport="grpc",
                                   job_id=f"count{k}{world}{batch}{drop}"
                                   ) as s:
                    assert s.info.steps_per_epoch == sampling.steps_per_epoch(
                        N, batch, world, r, drop, k)
                    assert s.info.samples_per_epoch == \
                        sampling.samples_per_epoch(N, batch, world, r, drop,
                                                   k)
        per_rank = entries(client, 3, 4, 7, "dropped", drop_last=True)
        assert sum(map(len, per_rank)) == N * 3 // 28 * 28


def test_bad_ra_reps_are_refused(client_daemon):
    with pytest.raises(ValueError, match="ra_reps 65 is outside 1..64"):
        Client(client_daemon.address).stream("train", "bytes", 4, ra_reps=65)
    with pytest.raises(ValueError, match="ra_reps 0 is outside"):
        Loader(client_daemon.address, "train", "bytes", 4, ra_reps=0)
    with Client(client_daemon.address) as client:
        # The daemon checks too, for a client that does not.
        request = StreamRequest("train", "bytes", 4)
        object.__setattr__(request, "ra_reps", 65)
        with pytest.raises(errors.InvalidArgument,
                           match="ra_reps 65 is outside 1..64"):
            Stream(client, request, transport="grpc")
        with client.stream("train", "bytes", 4, world_size=2, rank=0,
                           job_id="disagree", ra_reps=2, transport="grpc"):
            with pytest.raises(errors.FailedPrecondition, match="ra_reps"):
                client.stream("train", "bytes", 4, world_size=2, rank=1,
                              job_id="disagree", ra_reps=3, transport="grpc",
                              open_timeout=1)


def test_loader_resumes_on_another_world_size_each_copy_once(client_daemon):
    """A state saved mid-epoch by 2 ranks of batch 4 with ra_reps 3 resumes
    on 1 rank of batch 8: the epoch's (id, rep) entries exactly once."""
    address = client_daemon.address
    seen = []
    loaders = [Loader(address, "train", "bytes", 4, seed=9, rank=r,
                      world_size=2, job_id="before", ra_reps=3,
                      transport="shm") for r in range(2)]
    assert [len(ld) for ld in loaders] == [
        sampling.steps_per_epoch(N, 4, 2, r, False, 3) for r in range(2)]
    for ld in loaders:
        for step, batch in enumerate(ld):
            seen += list(zip(batch.sample_ids, batch.sample_reps))
            if step == 4:
                break
    state = loaders[0].state_dict()
    assert state["ra_reps"] == 3 and state["position"] == {"epoch": 0,
                                                           "step": 5}
    for ld in loaders:
        ld.close()
    other = Loader(address, "train", "bytes", 4, seed=9, rank=0, world_size=2,
                   job_id="other", ra_reps=2)
    with pytest.raises(ValueError, match="ra_reps 3 in the state, 2 here"):
        other.load_state_dict(state)
    resumed = Loader(address, "train", "bytes", 8, seed=9, rank=0,
                     world_size=1, job_id="after", ra_reps=3)
    resumed.load_state_dict(state)
    assert resumed.position == (0, 5)
    for batch in resumed:
        seen += list(zip(batch.sample_ids, batch.sample_reps))
    resumed.close()
    assert len(seen) == len(set(seen)) == N * 3
    assert sorted(seen) == [(i, r) for i in range(N) for r in range(3)]
    # A state saved before ra_reps existed resumes a Loader without it.
    old = {k: v for k, v in state.items() if k != "ra_reps"}
    Loader(address, "train", "bytes", 4, seed=9, rank=0, world_size=2,
           job_id="old").load_state_dict(old)


def test_stoker_stream_writes_id_and_rep(client_daemon, tmp_path):
    ids = tmp_path / "ids.txt"
    out = run([STOKER, "stream", "--address", client_daemon.address,
               "--dataset", "train", "--pipeline", "bytes", "--batch-size", 4,
               "--ra-reps", 2, "--indices-out", ids, "--json", "--quiet"])
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "OK" and result["samples"] == N * 2
    pairs = [tuple(map(int, line.split())) for line in
             ids.read_text().splitlines()]
    assert sorted(pairs) == [(i, r) for i in range(N) for r in range(2)]
    bad = run([STOKER, "stream", "--address", client_daemon.address,
               "--dataset", "train", "--pipeline", "bytes", "--batch-size", 4,
               "--ra-reps", 65], check=False)
    assert bad.returncode != 0 and "--ra-reps" in bad.stderr


def test_rank_batches_as_numpy_over_shm_carry_reps(client_daemon):
    with Client(client_daemon.address) as client:
        with client.stream("train", "bytes", 6, ra_reps=2, world_size=1,
                           transport="shm") as s:
            b = next(iter(s))
            assert s.transport == "shm"
            assert b.sample_reps == [j % 2 for j in range(6)]
            assert np.asarray(b["image"]).shape[0] == 6
            b.release()
