"""OutputPool: host memory that batch copies are written into, reused once
nothing views it any more.

Why. A copying consumer (stoker.torch.Loader without zero_copy) copies each
batch out of its shm slot. Into fresh memory, that costs far more than the
copy: glibc serves a block this large (a 64x3x224x224 float32 batch is
38.5 MB) with a new mmap and unmaps it on free, so every page of every
batch is faulted in and zeroed by the kernel again (9,400 faults a batch,
about 12 us each in a virtual machine). A block from the pool is already
resident: writing a batch into it costs the copy alone.

How. A batch gets one block for all its arrays (each at a 64-byte aligned
offset). The arrays are writable numpy views of a memoryview that numpy
makes for that batch alone, which every view derived from them keeps alive, numpy's and
torch's alike (torch.from_numpy keeps its array; a slice, view() or reshape
of a tensor shares its storage). The block goes back to the pool when that
memoryview is collected, that is when the last array, tensor or view over
the batch is gone, and never sooner: memory a consumer can still read is
never written again.

Bound. The pool keeps at most `keep` free blocks; a block that comes back
to a full pool takes the place of the oldest free block, which is freed.
It never allocates ahead: it holds as many blocks as the consumer held
batches at once, up to `keep`. A consumer that keeps every batch finds the
pool empty each time and gets fresh memory, as without a pool; once it lets
them go, `keep` of them stay and the rest are freed. Blocks are taken most
recently returned first, so a consumer that held more batches for a while
than it does now leaves the extra blocks unused at the old end of the pool:
a free block that was not taken while IDLE_TAKES blocks were is freed, and
the pool shrinks back to what the consumer holds now. clear() frees the
free blocks, and blocks still in use are freed when they come back instead
of being kept.

Thread-safety: arrays() and clear() are for one thread at a time; blocks
come back on any thread (a weak reference's callback runs wherever the last
view is dropped or the garbage collector runs, also inside arrays() itself)
through a dict's pop and a deque's append, which are atomic, and no lock.
"""
import collections
import math
import weakref
from typing import Any, Deque, Dict, Iterable, Tuple

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]
Block = npt.NDArray[np.uint8]

# Where each array of a batch starts in its block: a multiple of this.
ALIGN = 64
# Blocks are whole pages.
_PAGE = 4096
# A free block not taken while this many blocks were is freed.
IDLE_TAKES = 16


def _round_up(n: int, to: int) -> int:
    return (n + to - 1) // to * to


class OutputPool:
    """Blocks of host memory for copies of batches; see the module comment.
    """

    def __init__(self, keep: int) -> None:
        if keep < 0:
            raise ValueError(f"keep must be >= 0, got {keep}")
        self.keep = keep
        # Free blocks, the most recently returned last, each with the offset
        # of its first aligned byte and the count of blocks taken when it
        # came back. The deque's maxlen is the bound: appending to a full
        # one drops its oldest block.
        self._free: Deque[Tuple[Block, int, int]] = collections.deque(
            maxlen=keep)
        # The blocks in use, by the id of a weak reference to what keeps
        # each in use (see _lease): (the reference, generation, block,
        # offset). The reference's callback returns the block. (By id: a
        # weak reference hashes as its referent, a memoryview, which cannot
        # be hashed.)
        self._leased: Dict[int, Tuple["weakref.ref[Any]", int, Block,
                                      int]] = {}
        # Blocks from before the last clear() are not taken back.
        self._generation = 0
        # Counters, for tests and bench/memory: blocks allocated and blocks
        # reused.
        self.allocated = 0
        self.reused = 0
        # Whether a block once came back too small for a batch: batches of
        # varying size (ragged fields), whose new blocks get headroom.
        self._varies = False

    @property
    def free_blocks(self) -> int:
        """Blocks in the pool now, none of them viewed by anything."""
        return len(self._free)

    @property
    def free_bytes(self) -> int:
        """Bytes of the blocks in the pool now."""
        return sum(int(b.nbytes) for b, _, _ in list(self._free))

    def clear(self) -> None:
        """Frees the free blocks; blocks in use are freed when they come
        back."""
        self._generation += 1
        self._free.clear()

    def arrays(self, layouts: Iterable[Tuple[str, "np.dtype[Any]",
                                             Tuple[int, ...]]]
               ) -> Dict[str, Array]:
        """{name: a writable, uninitialized array of that dtype and shape},
        all in one block from the pool, which goes back to it once nothing
        views any of them."""
        spans = []
        size = 0
        for name, dtype, shape in layouts:
            nbytes = math.prod(shape) * dtype.itemsize
            spans.append((name, dtype, shape, size, nbytes))
            size = _round_up(size + nbytes, ALIGN)
        lease = self._lease(size)
        return {name: lease[offset:offset + nbytes].view(dtype).reshape(shape)
                for name, dtype, shape, offset, nbytes in spans}

    def _lease(self, size: int) -> Block:
        """A uint8 array of `size` bytes over a block of the pool; the
        block comes back when the array and every view of it are gone."""
        block, skip = self._take(size)
        # Made from the block's memoryview, the array (and every view of
        # it) is based on a memoryview that numpy makes for it, not on the
        # block, which the pool keeps: that memoryview lives exactly as long
        # as some view of this batch does. (Were the array ever based on
        # the block itself, the block would just never be reused.)
        lease = np.frombuffer(block.data, dtype=np.uint8, count=size,
                              offset=skip)
        owner = lease.base
        if owner is not None and owner is not block:
            ref = weakref.ref(owner, self._give_back)
            self._leased[id(ref)] = (ref, self._generation, block, skip)
        return lease

    def _take(self, size: int) -> Tuple[Block, int]:
        """A block of at least `size` bytes from its aligned offset, and
        that offset."""
        free = self._free
        taken = self.allocated + self.reused
        # Blocks left unused at the old end while IDLE_TAKES were taken.
        # (Only this thread takes from the deque; others only append.)
        while free and taken - free[0][2] >= IDLE_TAKES:
            free.popleft()
        while True:
            try:
                block, skip, _ = free.pop()
            except IndexError:
                break
            if block.nbytes - skip >= size:
                self.reused += 1
                return block, skip
            # Too small: batches vary in size. The block is freed.
            self._varies = True
        capacity = size + ALIGN
        if self._varies:
            capacity += capacity // 8
        self.allocated += 1
        block = np.empty(_round_up(capacity, _PAGE), dtype=np.uint8)
        return block, -block.ctypes.data % ALIGN

    def _give_back(self, ref: "weakref.ref[Any]") -> None:
        """Returns the block whose last view is gone to the pool, unless
        the pool was cleared since it was taken (a full deque drops its
        oldest block)."""
        _, generation, block, skip = self._leased.pop(id(ref))
        if self._generation == generation:
            self._free.append((block, skip, self.allocated + self.reused))
