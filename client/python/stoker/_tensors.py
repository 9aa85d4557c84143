"""Turning a received stoker.Batch into torch tensors where the Loader
yields them: views of the message or the cuda_ipc ring, copies out of an
shm slot into recycled memory, or copies to a CUDA device (see
stoker.torch's module comment, "Tensors")."""
import warnings
from typing import Dict, Iterator, List, Mapping, Tuple, cast

import torch

from ._pool import OutputPool
from .batch import Array, Batch, Ragged, view_instances
from .stream import Stream
from .transports import holds_slots


class TensorBatch(Dict[str, torch.Tensor]):
    """A dict of tensor name to torch.Tensor, with the batch's `epoch`,
    `step`, `position`, `sample_ids`, `skipped_ids`, `sample_reps` and
    `skipped_reps` (stoker.Batch) as attributes."""

    def __init__(self, tensors: Mapping[str, torch.Tensor], batch: Batch
                 ) -> None:
        super().__init__(tensors)
        self.epoch = batch.epoch
        self.step = batch.step
        self.sample_ids = batch.sample_ids
        self.skipped_ids = batch.skipped_ids
        self.sample_reps = batch.sample_reps
        self.skipped_reps = batch.skipped_reps

    @property
    def position(self) -> Tuple[int, int]:
        """The (epoch, step) of this batch."""
        return (self.epoch, self.step)

    def view(self, name: str, field: str = "image") -> List[torch.Tensor]:
        """The tensors of `field` in each instance of view `name` (a
        pipeline with views), in order: DINO's global crops are
        ``batch.view("global")``."""
        return view_instances(self, name, field)


# Whether torch.from_numpy still warns about read-only arrays here; see
# _from_numpy.
_quiet = False


def _flat_arrays(batch: Batch) -> Iterator[Tuple[str, Array]]:
    """The batch's arrays by name; a ragged field as two, <name> (values)
    and <name>.offsets, as the daemon sends it."""
    for name, value in batch.items():
        if isinstance(value, Ragged):
            yield name, value.values
            yield name + ".offsets", value.offsets
        else:
            yield name, value


def _from_numpy(arrays: Batch) -> Dict[str, torch.Tensor]:
    """{name: torch.from_numpy(array)} for a batch's read-only arrays (a
    ragged field as <name> and <name>.offsets).

    They view the received message, which is read-only to numpy but belongs
    to that batch alone, or an shm slot, which the Loader copies unless
    zero_copy (then documented read-only), so torch's warning about them is
    left out, whatever filters the caller has. torch gives it once per
    process: once a call gave none, plain calls are as quiet, and they save
    warnings.catch_warnings() on every batch, which cost more in a training
    loop (about 45 us a batch) than the rest of turning a batch to tensors.
    """
    global _quiet
    if _quiet:
        return {name: torch.from_numpy(a) for name, a in _flat_arrays(arrays)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", message=".*not writable")
        tensors = {name: torch.from_numpy(a)
                   for name, a in _flat_arrays(arrays)}
    _quiet = not caught
    return tensors


def to_tensors(batch: Batch, stream: Stream, device: torch.device,
               zero_copy: bool, pool: OutputPool) -> TensorBatch:
    """`batch` of `stream` as tensors on `device`. Releases the batch where
    the tensors no longer read its slot (a copy out of it, or copies to the
    GPU queued behind a fence); else the caller releases it when done. A
    copy out of an shm slot goes into a block of `pool`."""
    if stream.on_device:
        # cuda_ipc: tensors viewing the device ring, released with the
        # batch.
        return TensorBatch(cast(Dict[str, torch.Tensor],
                                dict(_flat_arrays(batch))), batch)
    if (holds_slots(stream.transport) and not zero_copy
            and device.type == "cpu"):
        tensors = copy_out(batch, pool)
        batch.release()
        return TensorBatch(tensors, batch)
    tensors = _from_numpy(batch)
    if device.type == "cuda":
        if stream.pinned:
            tensors = {name: t.to(device, non_blocking=True)
                       for name, t in tensors.items()}
        else:
            tensors = {name: staged_to_device(t, device)
                       for name, t in tensors.items()}
        # Acknowledged once the copies queued on the current stream have
        # run (a fence; see stoker.stream) where they read the slot.
        batch.release()
    return TensorBatch(tensors, batch)


def copy_out(batch: Batch, pool: OutputPool) -> Dict[str, torch.Tensor]:
    """Writable tensors holding a copy of each array of `batch` (a ragged
    field as two, see _flat_arrays), all in one block of `pool`, which the
    pool reuses only once every one of them and every view of one is
    gone."""
    arrays = dict(_flat_arrays(batch))
    out = pool.arrays((name, a.dtype, a.shape) for name, a in arrays.items())
    sources = _from_numpy(batch)
    return {name: torch.from_numpy(out[name]).copy_(sources[name])
            for name in arrays}


def staged_to_device(tensor: torch.Tensor, device: torch.device
                     ) -> torch.Tensor:
    """`tensor` copied to `device` through pinned host memory (torch's
    pinned-memory cache keeps the buffer until the copy has run)."""
    pinned = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
    pinned.copy_(tensor)
    return pinned.to(device, non_blocking=True)
