"""The copying Loader's output pool (stoker._pool.OutputPool): on its own,
a block comes back only once nothing views it, blocks in use never share
memory, and the pool is bounded; in stoker.torch.Loader against a real
stokerd, a batch costs the trainer no page faults once the pool is warm,
and batches or views the trainer keeps are never written again."""
import gc
import resource

import numpy as np
import pytest

from conftest import Daemon, write_config
from stoker._pool import ALIGN, IDLE_TAKES, OutputPool

torch = pytest.importorskip("torch")
from stoker.torch import Loader  # noqa: E402

LAYOUT = [("image", np.dtype(np.float32), (4, 3, 8, 8)),
          ("label", np.dtype(np.int64), (4,))]


def address(arrays):
    return arrays["image"].ctypes.data


def test_arrays_are_writable_aligned_and_shaped_as_asked():
    arrays = OutputPool(keep=2).arrays(LAYOUT)
    assert list(arrays) == ["image", "label"]
    for name, dtype, shape in LAYOUT:
        a = arrays[name]
        assert a.dtype == dtype and a.shape == shape
        assert a.flags.writeable and a.flags.c_contiguous
        assert a.ctypes.data % ALIGN == 0
    image, label = arrays["image"], arrays["label"]
    assert label.ctypes.data >= image.ctypes.data + image.nbytes


def test_a_dropped_batch_comes_back_and_is_reused():
    pool = OutputPool(keep=2)
    first = address(pool.arrays(LAYOUT))  # Dropped at once.
    assert pool.free_blocks == 1
    assert address(pool.arrays(LAYOUT)) == first
    assert (pool.allocated, pool.reused) == (1, 1)


def test_every_view_keeps_the_block_out_of_the_pool():
    pool = OutputPool(keep=2)
    arrays = pool.arrays(LAYOUT)
    tensors = {name: torch.from_numpy(a) for name, a in arrays.items()}
    del arrays
    image = tensors["image"]
    views = [image[0], image.view(4, -1), image.reshape(-1)[3:],
             image.permute(3, 2, 1, 0),
             image.numpy(), image.numpy()[1:], image.storage(),
             tensors["label"][1:]]
    del tensors, image
    gc.collect()
    while views:
        assert pool.free_blocks == 0, f"back with {views[-1]!r} alive"
        views.pop()
    assert pool.free_blocks == 1


def test_a_held_batch_is_never_written_by_a_later_one():
    pool = OutputPool(keep=2)
    held = []
    for k in range(6):
        arrays = pool.arrays(LAYOUT)
        arrays["image"].fill(k)
        arrays["label"].fill(k)
        if k % 2 == 0:
            held.append((k, {n: torch.from_numpy(a) for n, a in
                             arrays.items()}))
    for k, tensors in held:
        assert bool((tensors["image"] == k).all())
        assert bool((tensors["label"] == k).all())
    # The held batches have a block each; the odd ones, each let go once
    # the next was made, shared one.
    assert pool.allocated == 4 and pool.reused == 2


def test_the_pool_keeps_at_most_keep_blocks():
    pool = OutputPool(keep=3)
    kept = [pool.arrays(LAYOUT) for _ in range(10)]  # A trainer keeping all.
    assert pool.allocated == 10 and pool.reused == 0
    assert len({address(a) for a in kept}) == 10
    del kept
    assert pool.free_blocks == 3
    assert pool.free_bytes >= 3 * (4 * 3 * 8 * 8 * 4 + 4 * 8)


def test_blocks_left_unused_for_a_while_are_freed():
    pool = OutputPool(keep=3)
    kept = [pool.arrays(LAYOUT) for _ in range(3)]  # Held for a while.
    del kept
    assert pool.free_blocks == 3
    # Then one batch at a time: one block goes round, two lie unused.
    blocks = set()
    for _ in range(IDLE_TAKES + 1):
        blocks.add(address(pool.arrays(LAYOUT)))
    assert pool.free_blocks == 1 and len(blocks) == 1
    assert pool.allocated == 3  # Nothing new was needed meanwhile.


def test_clear_frees_the_pool_and_blocks_in_use_are_not_kept():
    pool = OutputPool(keep=3)
    out = pool.arrays(LAYOUT)
    del pool.arrays(LAYOUT)["image"]  # Back at once.
    assert pool.free_blocks == 1
    pool.clear()
    assert pool.free_blocks == 0
    del out
    assert pool.free_blocks == 0
    pool.arrays(LAYOUT)
    assert pool.free_blocks == 1  # Blocks taken after clear() come back.


def test_a_bigger_batch_gets_a_new_block_with_room_to_grow():
    pool = OutputPool(keep=2)
    pool.arrays([("tokens", np.dtype(np.int32), (1000,))])
    big = [("tokens", np.dtype(np.int32), (5000,))]
    pool.arrays(big)  # The small block is freed.
    assert pool.allocated == 2 and pool.free_blocks == 1
    pool.arrays([("tokens", np.dtype(np.int32), (5400,))])  # Fits.
    assert pool.allocated == 2 and pool.reused == 1


# Batches of 15 x 3 x 448 x 448 float32, 34.7 MiB: above glibc's largest
# mmap threshold (32 MiB), so that a fresh tensor a batch is a fresh mapping
# whose every page faults, as the bench's 38.5 MB batches do.
BIG = """\
  big:
    - decode_jpeg: {}
    - resize: {size: 448}
    - center_crop: {size: 448}
    - normalize: {mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25], dtype: float32}
    - layout: chw
"""


@pytest.fixture
def big_daemon(dataset, tmp_path):
    socket = tmp_path / "stoker.sock"
    d = Daemon(write_config(tmp_path / "stoker.yaml", dataset, socket, BIG),
               socket)
    d.start()
    yield d
    d.stop()


def loader(daemon, **kwargs):
    args = dict(dataset="train", pipeline="train", batch_size=4, seed=5,
                rank=0, world_size=1, job_id="")
    args.update(kwargs)
    return Loader(daemon.address, **args)


def batches(ld, n):
    """The next `n` batches of `ld`, across epochs, one at a time."""
    while n > 0:
        for batch in ld:
            yield batch
            n -= 1
            if n == 0:
                return


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_a_warm_loader_takes_almost_no_page_faults_a_batch(big_daemon):
    ld = loader(big_daemon, pipeline="big", batch_size=15, drop_last=True,
                prefetch=2)
    warm, measured = 4, 8
    faults = []
    for batch in batches(ld, warm + measured):
        assert batch["image"].shape == (15, 3, 448, 448)
        faults.append(minor_faults())
    ld.close()
    pages = 15 * 3 * 448 * 448 * 4 // resource.getpagesize()
    per_batch = (faults[-1] - faults[warm - 1]) / measured
    # Fresh memory a batch faults every page of it (8,900 here); what is
    # left is the first read of a ring slot and the interpreter's own.
    assert per_batch < pages / 10, (per_batch, pages)
    assert ld.output_pool.allocated <= 3


def test_kept_batches_and_views_are_never_overwritten(client_daemon):
    ld = loader(client_daemon, epochs=3)
    kept = []
    for k, batch in enumerate(batches(ld, 24)):
        image = batch["image"]
        want = image.clone()
        if k % 3 == 0:
            kept.append((batch, want))  # The whole batch.
        elif k % 3 == 1:
            kept.append((image[1], want[1]))  # A view of one sample.
        image.add_(0)  # Writable, as a trainer's augmentation would.
    for held, want in kept:
        got = held["image"] if isinstance(held, dict) else held
        assert torch.equal(got, want)
    ld.close()


def test_a_loader_that_keeps_every_batch_gets_fresh_memory(client_daemon):
    ld = loader(client_daemon, epochs=2)
    kept = list(batches(ld, 16))
    pool = ld.output_pool
    assert pool.allocated == 16 and pool.reused == 0
    assert len({b["image"].data_ptr() for b in kept}) == 16
    del kept
    gc.collect()
    assert pool.free_blocks == pool.keep == 3  # hold 1 + 2.
    ld.close()
    assert pool.free_blocks == 0


def test_a_loader_that_drops_each_batch_uses_two_blocks(client_daemon):
    ld = loader(client_daemon, epochs=2)
    addresses = {b["image"].data_ptr() for b in batches(ld, 16)}
    # The batch in the loop variable and the one being copied.
    assert len(addresses) == 2
    assert ld.output_pool.allocated == 2
    ld.close()


def test_a_copying_loader_asks_for_a_ring_without_hold_slots(client_daemon):
    # The copying Loader releases each slot as soon as it has copied it, so
    # its ring needs prefetch slots only; a zero-copy one keeps the batch it
    # works on in its slot: prefetch + hold.
    for zero_copy, slots in ((False, 2), (True, 4)):
        ld = loader(client_daemon, epochs=1, prefetch=2, hold=2,
                    zero_copy=zero_copy)
        assert len(list(batches(ld, 3))) == 3
        assert ld.stream.ring_slots == slots, zero_copy
        ld.close()


def test_a_copying_loader_reads_on_through_a_ring_of_one_slot(client_daemon):
    # prefetch 1: one slot, which the daemon can fill again only once the
    # ack of the batch copied out of it has gone (no ack is kept back).
    ld = loader(client_daemon, epochs=2, prefetch=1)
    seen = [(b.epoch, b.step) for b in batches(ld, 12)]
    assert ld.stream.ring_slots == 1
    assert seen == sorted(set(seen)) and len(seen) == 12
    ld.close()


def test_zero_copy_and_grpc_leave_the_pool_alone(client_daemon):
    for kwargs in (dict(zero_copy=True), dict(transport="grpc")):
        ld = loader(client_daemon, epochs=1, **kwargs)
        assert len(list(batches(ld, 8))) == 8
        assert ld.output_pool.allocated == 0
        ld.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_cuda_loader_reuses_device_memory_and_takes_no_faults(big_daemon):
    # Over shm to a GPU the tensors are copied from the page-locked ring
    # (or, where it could not be page-locked, through torch's cache of
    # pinned memory) into device memory from torch's caching allocator: no
    # output pool, no fresh host memory a batch, and no new device segment
    # once warm.
    ld = loader(big_daemon, pipeline="big", batch_size=15, drop_last=True,
                prefetch=2, device="cuda", transport="shm")
    warm, measured = 4, 8
    faults, segments = [], []
    for batch in batches(ld, warm + measured):
        assert batch["image"].device.type == "cuda"
        torch.cuda.current_stream().synchronize()
        faults.append(minor_faults())
        segments.append(torch.cuda.memory_stats()["segment.all.allocated"])
    ld.close()
    pages = 15 * 3 * 448 * 448 * 4 // resource.getpagesize()
    assert (faults[-1] - faults[warm - 1]) / measured < pages / 10
    assert segments[-1] == segments[warm - 1], segments
    assert ld.output_pool.allocated == 0
