"""Batch: one step's tensors, by name, with where they came from."""
import weakref
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy.typing as npt

Array = npt.NDArray[Any]


class Batch(Mapping[str, Array]):
    """A read-only mapping of tensor name to numpy array, batch dimension
    first: ``batch["image"]``, ``batch["label"]``.

    With the grpc transport the arrays are read-only views of the message
    gRPC received: nothing is copied, and the memory lives as long as any
    array of the batch does. Use ``np.array(batch["image"])`` for a writable
    copy.

    With the shm transport the arrays are read-only views of the batch's
    slot in the daemon's shared-memory ring (no copy at all). The slot is
    this batch's until it is released: ``batch.release()`` (idempotent;
    also ``with batch:``), or when the Batch and every array (or tensor)
    viewing it have been collected. After release() the arrays stay
    readable but the daemon may refill the slot with a later batch: copy
    what must outlive it. Releasing acknowledges the batch to the daemon,
    which sends at most ``prefetch + hold`` unreleased batches. For other
    transports release() does nothing.

    ``epoch`` and ``step`` give the batch's position; ``sample_ids`` the
    dataset indices of its samples in order; ``skipped_ids`` the samples of
    this step the daemon left out as corrupt; ``shared`` whether a shared
    run built it once for several streams. ``nbytes`` is the size of all
    tensors. Safe to read from any thread.
    """

    __slots__ = ("_arrays", "epoch", "step", "sample_ids", "skipped_ids",
                 "shared", "_release", "__weakref__")

    def __init__(self, arrays: Dict[str, Array], epoch: int, step: int,
                 sample_ids: List[int], skipped_ids: List[int],
                 release: Optional[weakref.finalize] = None,
                 shared: bool = False) -> None:
        self._arrays = arrays
        self._release = release  # A weakref.finalize, for shm.
        self.epoch = epoch
        self.step = step
        self.sample_ids = sample_ids
        self.skipped_ids = skipped_ids
        self.shared = shared

    def __getitem__(self, name: str) -> Array:
        return self._arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def release(self) -> None:
        """Hands the batch's shm slot back to the daemon (acknowledges the
        batch). Idempotent; safe from any thread."""
        release = self._release
        if release is not None:
            release()

    @property
    def released(self) -> bool:
        """True once an shm batch was released; always False otherwise."""
        return self._release is not None and not self._release.alive

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @property
    def nbytes(self) -> int:
        return sum(int(a.nbytes) for a in self._arrays.values())

    @property
    def position(self) -> Tuple[int, int]:
        """The (epoch, step) of this batch."""
        return (self.epoch, self.step)

    def __repr__(self) -> str:
        tensors = ", ".join(f"{k}: {v.dtype}{list(v.shape)}"
                            for k, v in self._arrays.items())
        return (f"Batch(epoch={self.epoch}, step={self.step}, "
                f"samples={len(self.sample_ids)}, {{{tensors}}})")
