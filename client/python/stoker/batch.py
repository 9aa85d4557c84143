"""Batch: one step's tensors, by name, with where they came from; Ragged:
a variable-length field of a batch (token ids, boxes, bytes, str)."""
import weakref
from typing import (Any, Dict, Iterable, Iterator, List, Mapping, Optional,
                    Tuple, Union)

import numpy as np
import numpy.typing as npt

from . import errors
from ._proto.stoker.v1 import stoker_pb2 as pb

Array = npt.NDArray[Any]


class Ragged:
    """A ragged field of a batch: ``values``, every sample's rows back to
    back (for bytes and str fields: their bytes, uint8), and ``offsets``,
    int64, ``len(batch) + 1`` of them, so that sample k is
    ``values[offsets[k]:offsets[k + 1]]``.

    ``ragged[k]`` is sample k: a numpy array of its rows, or, for a field of
    bytes (uint8 values of shape [-1] per sample, as bytes fields and
    undecoded images are; a uint8 ndarray of shape [-1] reads the same way),
    ``bytes``, and for a str field (``utf8``) a ``str``. Both arrays are
    read-only views of the batch, like its other arrays."""

    __slots__ = ("values", "offsets", "utf8")

    def __init__(self, values: Array, offsets: "npt.NDArray[np.int64]",
                 utf8: bool = False) -> None:
        self.values = values
        self.offsets = offsets
        self.utf8 = utf8

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    def __getitem__(self, k: int) -> Union[Array, bytes, str]:
        n = len(self)
        if k < 0:
            k += n
        if not 0 <= k < n:
            raise IndexError(f"sample {k} of a ragged field of {n}")
        rows = self.values[int(self.offsets[k]):int(self.offsets[k + 1])]
        if self.utf8:
            return rows.tobytes().decode("utf-8")
        if self.values.dtype == np.uint8 and self.values.ndim == 1:
            return rows.tobytes()
        return rows

    def __iter__(self) -> Iterator[Union[Array, bytes, str]]:
        for k in range(len(self)):
            yield self[k]

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes) + int(self.offsets.nbytes)

    def __repr__(self) -> str:
        kind = "str" if self.utf8 else str(self.values.dtype)
        return (f"Ragged({len(self)} samples, {kind}"
                f"{list(self.values.shape)})")


# What a batch holds under a name: an array, or a ragged field.
Field = Union[Array, Ragged]


def pair_ragged(arrays: Dict[str, Array], specs: Iterable[pb.TensorSpec],
                read_offsets: bool = True) -> Dict[str, Field]:
    """`arrays` with each ragged field's values and "<name>.offsets" arrays
    replaced by one Ragged under the field's name; DataLoss when offsets do
    not index their values. Without `read_offsets` (arrays on a GPU, where
    reading them would wait for the device) only their layout is checked."""
    out: Dict[str, Field] = dict(arrays)
    for spec in specs:
        if not spec.offsets_for:
            continue
        values = arrays.get(spec.offsets_for)
        offsets = arrays[spec.name]
        if (values is None or spec.dtype != pb.DTYPE_INT64
                or len(spec.shape) != 1 or spec.shape[0] < 1
                or (read_offsets and (
                    offsets[0] != 0 or offsets[-1] != values.shape[0]
                    or bool(np.any(offsets[1:] < offsets[:-1]))))):
            raise errors.DataLoss(
                f"tensor '{spec.name}' does not index the rows of "
                f"'{spec.offsets_for}'")
        utf8 = any(t.name == spec.offsets_for and t.utf8 for t in specs)
        out[spec.offsets_for] = Ragged(values, offsets, utf8)
        del out[spec.name]
    return out


def view_instances(tensors: Mapping[str, Any], view: str,
                   field: str = "image") -> List[Any]:
    """The tensors of `field` in each instance of `view` of a pipeline with
    views, in instance order: ``<view>.<k>.<field>`` for k = 0, 1, ..., or
    ``[<view>.<field>]`` for a view of one instance. KeyError, naming the
    view and the batch's tensors, when there is no such view."""
    if f"{view}.{field}" in tensors:
        return [tensors[f"{view}.{field}"]]
    found: List[Any] = []
    while f"{view}.{len(found)}.{field}" in tensors:
        found.append(tensors[f"{view}.{len(found)}.{field}"])
    if not found:
        raise KeyError(f"no view '{view}' with field '{field}'; the batch "
                       f"has {', '.join(tensors)}")
    return found


class Batch(Mapping[str, Field]):
    """A read-only mapping of tensor name to numpy array, batch dimension
    first: ``batch["image"]``, ``batch["label"]``; a ragged field (a
    variable-length array, bytes, str) is a Ragged: ``batch["tokens"][k]``
    is sample k's tokens. Over cuda_ipc the arrays are torch tensors on the
    GPU instead (a Ragged's values and offsets too).

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
    which sends at most ``prefetch + hold`` unreleased batches. Over
    cuda_ipc, and over shm to a GPU (a Stream with cuda_device), the ack
    waits until the work queued on the GPU's current stream at release has
    run (see stoker.transports). For other transports release() does
    nothing.

    ``epoch`` and ``step`` give the batch's position; ``sample_ids`` the
    dataset indices of its samples in order; ``skipped_ids`` the samples of
    this step the daemon left out as corrupt; with ``ra_reps`` > 1,
    ``sample_reps`` and ``skipped_reps`` say which copy of its sample each
    entry is (else they are empty: each is copy 0); ``shared`` whether a shared
    run built it once for several streams. ``nbytes`` is the size of all
    tensors. Safe to read from any thread.
    """

    __slots__ = ("_arrays", "epoch", "step", "sample_ids", "skipped_ids",
                 "sample_reps", "skipped_reps", "shared", "_release",
                 "__weakref__")

    def __init__(self, arrays: Dict[str, Field], epoch: int, step: int,
                 sample_ids: List[int], skipped_ids: List[int],
                 release: Optional[weakref.finalize] = None,
                 shared: bool = False,
                 sample_reps: Optional[List[int]] = None,
                 skipped_reps: Optional[List[int]] = None) -> None:
        self._arrays = arrays
        self._release = release  # A weakref.finalize, for shm.
        self.epoch = epoch
        self.step = step
        self.sample_ids = sample_ids
        self.skipped_ids = skipped_ids
        self.sample_reps = sample_reps or []
        self.skipped_reps = skipped_reps or []
        self.shared = shared

    def __getitem__(self, name: str) -> Field:
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

    def view(self, name: str, field: str = "image") -> List[Field]:
        """The arrays of `field` in each instance of view `name` (a
        pipeline with views), in order; see view_instances."""
        return view_instances(self._arrays, name, field)

    def __repr__(self) -> str:
        tensors = ", ".join(
            f"{k}: {v!r}" if isinstance(v, Ragged)
            else f"{k}: {v.dtype}{list(v.shape)}"
            for k, v in self._arrays.items())
        return (f"Batch(epoch={self.epoch}, step={self.step}, "
                f"samples={len(self.sample_ids)}, {{{tensors}}})")
