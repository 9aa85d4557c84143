"""stoker.torch.Loader resumed on another number of ranks: a state saved by
a job of W ranks of batch B loads into W' ranks of B' with W' * B' = W * B
at the same global step, and the new ranks deliver every remaining sample of
the epoch exactly once. Ranks are simulated by several Loaders, each with
its rank and world size, against one daemon; test_client_ddp_resize.py does
the same with real processes under torchrun.

The dataset has 30 samples. With a global batch of 8 an epoch has 3 full
global steps and a tail of 6: split 3 + 3 over 2 ranks, 2 + 2 + 2 + 0 over 4
(rank 3 has one step fewer).
"""
import pytest

from stoker import sampling
from stoker.torch import Loader

N = 30


def ranks(daemon, world, batch, job, drop_last=False):
    return [Loader(daemon.address, "train", "bytes", batch_size=batch,
                   seed=4, epochs=2, rank=r, world_size=world, job_id=job,
                   drop_last=drop_last)
            for r in range(world)]


def run(loader, steps=None):
    """The batches of the loader's current epoch, or its first `steps`."""
    out = []
    for batch in loader:
        out.append(batch)
        if len(out) == steps:
            break
    return out


def ids(batches):
    return [i for b in batches for i in b.sample_ids]


def stop_and_resume(daemon, before, after, steps, drop_last=False):
    """Runs `steps` steps of epoch 0 on every rank of layout `before`
    (world, batch), saves rank 0's state, and resumes it on every rank of
    layout `after`: (ids before, {rank: batches of the rest of epoch 0},
    {rank: batches of epoch 1}, the state)."""
    first = ranks(daemon, *before, job="before", drop_last=drop_last)
    head = [i for ld in first for i in ids(run(ld, steps))]
    state = first[0].state_dict()
    for ld in first:
        ld.close()
    second = ranks(daemon, *after, job="after", drop_last=drop_last)
    rest, next_epoch = {}, {}
    for ld in second:
        ld.load_state_dict(state)
        rest[ld.rank] = run(ld)
        assert ld.position == (1, 0)
        next_epoch[ld.rank] = run(ld)
        ld.close()
    return head, rest, next_epoch, state


@pytest.mark.parametrize("before, after, steps", [
    ((4, 2), (2, 4), 2),  # Fewer ranks, mid-epoch.
    ((4, 2), (2, 4), 3),  # Fewer ranks, before the tail step.
    ((2, 4), (4, 2), 3),  # More ranks, before the tail step.
    ((2, 4), (4, 2), 1),  # More ranks, mid-epoch.
])
def test_the_same_global_batch_resumes_exactly_once(client_daemon, before,
                                                    after, steps):
    head, rest, next_epoch, state = stop_and_resume(
        client_daemon, before, after, steps)
    assert state["position"] == {"epoch": 0, "step": steps}
    assert (state["world_size"], state["batch_size"]) == before
    assert state["global_batch"] == 8
    tail = [i for r in sorted(rest) for i in ids(rest[r])]
    assert len(head) + len(tail) == N
    assert sorted(head + tail) == list(range(N))
    # At the same global step: the rest is what an uninterrupted run of the
    # new layout gets from that step on, batch for batch.
    whole = ranks(client_daemon, *after, job="whole")
    for ld in whole:
        want = [(b.position, b.sample_ids) for b in run(ld)[steps:]]
        assert [(b.position, b.sample_ids) for b in rest[ld.rank]] == want
        ld.close()
    assert sorted(ids(b for r in next_epoch for b in next_epoch[r])) == \
        list(range(N))


def test_with_drop_last_both_layouts_leave_out_the_same_tail(client_daemon):
    head, rest, _, _ = stop_and_resume(client_daemon, (4, 2), (2, 4), 2,
                                       drop_last=True)
    whole = ranks(client_daemon, 4, 2, job="whole", drop_last=True)
    want = sorted(i for ld in whole for i in ids(run(ld)))
    for ld in whole:
        ld.close()
    assert len(want) == 24  # 3 global steps of 8; 6 left out.
    tail = [i for r in sorted(rest) for i in ids(rest[r])]
    assert sorted(head + tail) == want


def test_another_global_batch_resumes_where_a_step_begins(client_daemon):
    # 3 steps of 8 end at sample 24, where step 2 of 12 begins (its tail).
    head, rest, _, _ = stop_and_resume(client_daemon, (2, 4), (2, 6), 3)
    assert [b.position for b in rest[0]] == [(0, 2)]
    tail = [i for r in sorted(rest) for i in ids(rest[r])]
    assert sorted(head + tail) == list(range(N))


def test_another_global_batch_is_refused_where_no_step_begins(client_daemon):
    first = ranks(client_daemon, 2, 4, job="before")
    for ld in first:
        run(ld, 1)
    state = first[0].state_dict()
    resumed = Loader(client_daemon.address, "train", "bytes", batch_size=6,
                     seed=4, rank=0, world_size=2, job_id="after")
    with pytest.raises(ValueError) as e:
        resumed.load_state_dict(state)
    message = str(e.value)
    for part in ("global batch of 12", "saved with a global batch of 8",
                 "begins at entry 8", "batch_size 4 with world_size 2",
                 "set_epoch(1)"):
        assert part in message, message
    assert resumed.position == (0, 0)  # Unchanged.
    for ld in first:
        ld.close()


def test_a_state_without_global_batch_still_loads(client_daemon):
    # Saved by a Loader from before global_batch was recorded.
    state = ranks(client_daemon, 4, 2, job="old")[0].state_dict()
    del state["global_batch"]
    state["position"] = {"epoch": 0, "step": 2}
    ld = ranks(client_daemon, 2, 4, job="new")[0]
    ld.load_state_dict(state)
    assert ld.position == (0, 2)
    with pytest.raises(ValueError, match="inconsistent"):
        ld.load_state_dict(dict(state, global_batch=6))


def test_resume_step():
    assert sampling.resume_step(5, 32, 32) == 5
    assert sampling.resume_step(3, 8, 12) == 2
    assert sampling.resume_step(0, 8, 12) == 0
    assert sampling.resume_step(1, 8, 12) is None
    assert sampling.resume_step(3, 8, 4) == 6
    with pytest.raises(ValueError):
        sampling.resume_step(1, 8, 0)
