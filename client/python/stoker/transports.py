"""Transports: how a batch's tensor bytes reach this process.

The stream protocol is the same for every transport; what differs is where
a Batch's tensors live (in the message payload, a shared-memory slot, a GPU
buffer) and what the client gives back when it is done with them. A
Transport is the small piece that knows this: it adds its fields to the open
request, checks the daemon's header (and maps what it names), turns each
Batch into arrays, and is closed with its stream.

This client reads `grpc`, `shm` and `cuda_ipc`. A transport this process
cannot use (cuda_ipc without torch, CUDA or a GPU) says why
(Transport.unavailable): asking for it by name raises FailedPrecondition
with the reason before anything is sent, and `auto` moves past it with the
reason. `auto` negotiates: it asks for each candidate that suits the
daemon's address and the consumer's GPU, in order of preference (cuda_ipc,
shm, grpc), and takes the first that the daemon grants; a
FAILED_PRECONDITION or PERMISSION_DENIED answer (e.g. the daemon would not
hand over the shm ring to this user) moves on to the next, and
Stream.transport says where it ended. Adding a transport is one class here
and its place in _PREFERRED, from which every table is derived.

A transport's `arrays(response)`, for a batch response, returns ({name:
array}, owner): numpy arrays, or for a transport that is `on_device`
(cuda_ipc) torch tensors on the GPU. For a transport with
`ack_on_release`, `owner` is an object that every array of the batch
keeps alive (over shm the slot ndarray, their numpy base): the stream
acknowledges the batch when the batch is released, or when the owner is
collected, which happens only once the Batch and every array and tensor
viewing it are gone. Otherwise owner is None and the batch is acknowledged
when handed over.

The consumer's GPU (Stream's `cuda_device`) may still read a released
batch: the kernels and copies it queued run later. So a release asks the
transport for a fence (a CUDA event on the GPU's current stream, where the
consumer's reads may be pending), and the ack waits for it (see
_releases.Releases).
"""
import logging
import mmap
from typing import Any, Dict, Iterator, List, Optional, Tuple, Type, Union

import numpy as np
import numpy.typing as npt

from . import _cuda, errors
from ._proto.stoker.v1 import stoker_pb2 as pb
from ._fd import fetch_fd, map_ring
from ._wire import Response

Array = npt.NDArray[Any]
# What Transport.arrays returns: the batch's arrays by name (numpy arrays,
# or torch tensors for a transport on_device), and their owner.
Arrays = Tuple[Dict[str, Any], Optional[object]]

_log = logging.getLogger("stoker")

Fence = _cuda.Fence


def _numpy_dtypes() -> Dict[int, "np.dtype[Any]"]:
    """The numpy dtype of each DType, derived from its name so that the two
    cannot drift: DTYPE_FLOAT32 is numpy's float32, little-endian (the byte
    order of every tensor the daemon sends, whatever this host's)."""
    return {value: np.dtype(name[len("DTYPE_"):].lower()).newbyteorder("<")
            for name, value in pb.DType.items()
            if value != pb.DTYPE_UNSPECIFIED}


DTYPES: Dict[int, "np.dtype[Any]"] = _numpy_dtypes()

def dtype_of(value: int) -> "np.dtype[Any]":
    try:
        return DTYPES[value]
    except KeyError:
        raise errors.Internal(
            f"the daemon sent unknown dtype {value}") from None


class Transport:
    """One stream's transport. Not thread-safe; used by its Stream only,
    but for fence(), which a release calls from any thread.

    `cuda_device` is the GPU (torch's index) where the consumer uses the
    batches, or None: cuda_ipc maps its ring there (None: the current
    GPU), and shm page-locks its ring for copies to it."""

    name = ""
    wire: "pb.Transport" = pb.TRANSPORT_UNSPECIFIED
    ack_on_release = False
    # Whether arrays() gives torch tensors on the GPU rather than numpy
    # arrays.
    on_device = False
    # Whether the ring is page-locked for copies to cuda_device.
    pinned = False
    # Whether the stream's messages are worth receiving on a thread of their
    # own while the consumer works (see _call.Call).
    read_ahead = True

    def __init__(self, cuda_device: Optional[int] = None) -> None:
        self.cuda_device = cuda_device

    @classmethod
    def suits(cls, address: str, cuda_device: Optional[int]) -> bool:
        """Whether `auto` should try this transport for a daemon at
        `address` and a consumer on `cuda_device`."""
        return True

    @classmethod
    def unavailable(cls, cuda_device: Optional[int]) -> Optional[str]:
        """Why this process cannot use this transport, or None."""
        return None

    def prepare(self, open_request: pb.OpenStream) -> None:
        """Adds this transport's fields to an OpenStream message."""
        open_request.transport = self.wire

    def attach(self, header: pb.StreamHeader) -> None:
        """Called with the daemon's StreamHeader. Raises FailedPrecondition
        when this client cannot use what the daemon granted."""
        granted = NAMES.get(header.transport, str(header.transport))
        if granted != self.name:
            raise errors.FailedPrecondition(
                f"asked for transport {self.name}, the daemon granted "
                f"{granted}")

    def arrays(self, response: Response) -> Arrays:
        """({name: array}, owner) for a parsed batch Response (see _wire);
        see the module comment."""
        raise NotImplementedError

    @property
    def slots(self) -> int:
        """Slots of the stream's own ring, for a transport with
        `ack_on_release`; 0 otherwise."""
        return 0

    def fence(self) -> Optional[Fence]:
        """What the ack of a batch released now must wait for: the work
        the consumer has queued on its GPU so far, when that may read the
        batch's memory; None when the consumer's reads were done when it
        released the batch."""
        return None

    def close(self) -> None:
        pass


class GrpcTransport(Transport):
    """Tensors travel in Batch.payload; each array is a view of the bytes
    gRPC received (read-only, no copy)."""

    name = "grpc"
    wire = pb.TRANSPORT_GRPC

    def attach(self, header: pb.StreamHeader) -> None:
        if header.transport not in (pb.TRANSPORT_GRPC,
                                    pb.TRANSPORT_UNSPECIFIED):
            super().attach(header)

    def arrays(self, response: Response) -> Arrays:
        batch: pb.Batch = response.batch  # type: ignore[assignment]
        base, size = response.payload_offset, response.payload_length
        return _views(batch, response.raw, base, size,
                      "the payload"), None


# Where a tensor of a batch lies: name, dtype, shape, element count and
# byte offset.
Layout = Tuple[str, "np.dtype[Any]", Tuple[int, ...], int, int]


def _layout(batch: pb.Batch, size: int, where: str) -> Iterator[Layout]:
    """Each tensor of the batch; DataLoss when one does not fit in `size`
    bytes."""
    for t in batch.tensors:
        dtype = dtype_of(t.dtype)
        shape = tuple(t.shape)
        count = 1
        for d in shape:
            count *= d
        if (t.offset + t.length > size or count < 0 or
                count * dtype.itemsize != t.length):
            raise errors.DataLoss(
                f"tensor '{t.name}' of epoch {batch.epoch} step "
                f"{batch.step} does not fit {where}: offset "
                f"{t.offset}, length {t.length}, shape {list(shape)} "
                f"{dtype}, {where} {size} bytes")
        yield t.name, dtype, shape, count, t.offset


def _views(batch: pb.Batch, buffer: Union[bytes, Array], base: int,
           size: int, where: str) -> Dict[str, Array]:
    """{name: read-only array} of the batch's tensors, each a view of
    buffer[base + offset:...]; DataLoss when one does not fit in `size`
    bytes."""
    return {name: np.frombuffer(buffer, dtype=dtype, count=count,
                                offset=base + offset).reshape(shape)
            for name, dtype, shape, count, offset in _layout(batch, size,
                                                             where)}


class ShmTransport(Transport):
    """Tensors lie in a slot of the stream's shared-memory ring, which this
    transport maps read-only when the stream opens; each array is a view
    of the slot (no copy). The slot stays the client's until the batch is
    released (see Stream and Batch.release). A stream that joined a shared
    run also maps the run's ring, where the run lends it batches in place
    (Batch.in_shared_ring).

    With a cuda_device, the rings are also page-locked for that GPU
    (`pinned`), so that a copy from a slot to the GPU runs asynchronously;
    a release then waits for the copies queued on the GPU's current stream
    (fence). Where the driver refuses, the transport says so once (log)
    and the rings stay pageable: copies from them are synchronous."""

    name = "shm"
    wire = pb.TRANSPORT_SHM
    ack_on_release = True
    read_ahead = False  # A message is the slot and layout: small.

    def __init__(self, cuda_device: Optional[int] = None) -> None:
        super().__init__(cuda_device)
        # in_shared_ring -> (mapping, slots, slot_bytes)
        self._rings: Dict[bool, Tuple[mmap.mmap, int, int]] = {}
        self._pins: List[_cuda.HostRegistration] = []

    @classmethod
    def suits(cls, address: str, cuda_device: Optional[int]) -> bool:
        return is_local(address)

    def prepare(self, open_request: pb.OpenStream) -> None:
        super().prepare(open_request)
        open_request.map_shared_ring = True
        open_request.notice_socket = True  # See _call.NoticeCall.

    def attach(self, header: pb.StreamHeader) -> None:
        super().attach(header)
        if not header.HasField("shm") or header.shm.slots == 0:
            raise errors.Internal("the daemon granted transport shm without "
                                  "a ring")
        # The shared ring first: the daemon may end a short stream as soon
        # as the stream's own ring is handed over.
        for shared, field in ((True, "shared_ring"), (False, "shm")):
            if header.HasField(field):
                ring = getattr(header, field)
                self._rings[shared] = (map_ring(ring), ring.slots,
                                       ring.slot_bytes)
        if self.cuda_device is not None:
            self._pin(self.cuda_device)

    def _pin(self, device: int) -> None:
        try:
            for mapping, _, _ in self._rings.values():
                self._pins.append(_cuda.HostRegistration(
                    np.frombuffer(mapping, dtype=np.uint8), device))
        except errors.StokerError as e:
            for pin in self._pins:
                pin.close()
            self._pins = []
            _say_once(f"the shm ring is not page-locked for cuda:{device} "
                      f"({e.message}): copies from it to the GPU are "
                      f"synchronous")
            return
        self.pinned = True

    def arrays(self, response: Response) -> Arrays:
        batch: pb.Batch = response.batch  # type: ignore[assignment]
        ring = self._rings.get(batch.in_shared_ring)
        where = "the shared ring" if batch.in_shared_ring else "the ring"
        if ring is None:
            raise errors.DataLoss(
                f"batch of epoch {batch.epoch} step {batch.step} is in "
                f"{where}, which is not mapped")
        mapping, slots, slot_bytes = ring
        if batch.slot >= slots:
            raise errors.DataLoss(
                f"batch of epoch {batch.epoch} step {batch.step} names slot "
                f"{batch.slot} of {where}, which has {slots}")
        # The slot as one array: every tensor's numpy base, so it lives as
        # long as any view of the batch does (and keeps the mapping alive).
        slot = np.frombuffer(mapping, dtype=np.uint8, count=slot_bytes,
                             offset=batch.slot * slot_bytes)
        return _views(batch, slot, 0, slot_bytes,
                      f"slot {batch.slot} of {where}"), slot

    @property
    def slots(self) -> int:
        """Slots of the stream's own ring."""
        return self._rings[False][1] if False in self._rings else 0

    def fence(self) -> Optional[Fence]:
        # Copies from a pageable ring are done when they return.
        if not self.pinned or self.cuda_device is None:
            return None
        return _cuda.fence(self.cuda_device)

    def close(self) -> None:
        # Unregistered once the GPU is done with the copies queued; unmapped
        # once the last array of its batches is gone (a mapping with views
        # cannot be closed; dropping it is enough).
        self.pinned = False
        for pin in self._pins:
            pin.close()
        self._pins = []
        self._rings = {}


_said: List[str] = []


def _say_once(message: str) -> None:
    """Logs a warning the first time this process meets it."""
    if message not in _said:
        _said.append(message)
        _log.warning("%s", message)


class CudaIpcTransport(Transport):
    """Tensors lie in a slot of the stream's ring of device buffers on the
    consumer's GPU (CudaIpcRing in local_transports.proto), which this
    transport maps when the stream opens (_cuda.DeviceRing); each array is a
    torch tensor on that GPU viewing the slot (no copy). The daemon announces a
    batch (on the notice socket, as over shm) only once it is complete on the
    device, so its tensors may be read on any CUDA stream at once.

    The slot is the consumer's until the batch is released, as over shm.
    But the kernels that read the tensors run after the Python code that
    queued them: so a release records a CUDA event on the GPU's current
    stream, and the batch is acknowledged (the daemon may overwrite the
    slot) only once that event has completed. The stream sends such acks
    as their events complete, checking before it reads the next batch; it
    waits for the oldest when every slot is taken, and for all at close.
    Release a batch (or drop its tensors) on the thread and stream whose
    kernels read it, or after synchronizing the other streams that do.
    The tensors are writable, but the slot is the daemon's after release:
    clone what you keep longer."""

    name = "cuda_ipc"
    wire = pb.TRANSPORT_CUDA_IPC
    ack_on_release = True
    on_device = True
    read_ahead = False  # A message is the slot and layout: small.

    def __init__(self, cuda_device: Optional[int] = None) -> None:
        super().__init__(cuda_device)
        self.device = (_cuda.current_device() if cuda_device is None
                       else cuda_device)
        self.gpu_uuid = _cuda.gpu_uuid(self.device)
        self._ring: Optional[_cuda.DeviceRing] = None

    @classmethod
    def suits(cls, address: str, cuda_device: Optional[int]) -> bool:
        # A consumer without a GPU wants numpy arrays, not CUDA tensors.
        return is_local(address) and cuda_device is not None

    @classmethod
    def unavailable(cls, cuda_device: Optional[int]) -> Optional[str]:
        return _cuda.unavailable(cuda_device)

    def prepare(self, open_request: pb.OpenStream) -> None:
        super().prepare(open_request)
        open_request.gpu_uuid = self.gpu_uuid
        open_request.notice_socket = True

    def attach(self, header: pb.StreamHeader) -> None:
        super().attach(header)
        ring = header.cuda_ipc
        if not header.HasField("cuda_ipc") or ring.slots == 0:
            raise errors.Internal("the daemon granted transport cuda_ipc "
                                  "without a ring")
        if ring.gpu_uuid != self.gpu_uuid:
            raise errors.Internal(
                f"asked for a cuda_ipc ring on {self.gpu_uuid}, the daemon "
                f"made it on {ring.gpu_uuid}")
        if ring.ring_bytes < ring.slots * ring.slot_bytes:
            raise errors.DataLoss(
                f"the cuda_ipc ring has {ring.ring_bytes} bytes, less than "
                f"its {ring.slots} slots of {ring.slot_bytes} bytes")
        fd = -1
        if ring.handle_kind == pb.CUDA_HANDLE_VMM_POSIX_FD:
            fd = fetch_fd(ring.fd_socket, ring.token, "the cuda_ipc ring")
        self._ring = _cuda.DeviceRing(ring, fd, self.device)

    def arrays(self, response: Response) -> Arrays:
        batch: pb.Batch = response.batch  # type: ignore[assignment]
        ring = self._ring
        if ring is None or batch.in_shared_ring or batch.slot >= ring.slots:
            where = ("a shared ring, which cuda_ipc does not have"
                     if batch.in_shared_ring else
                     f"the cuda_ipc ring, which has "
                     f"{ring.slots if ring else 0} slots")
            raise errors.DataLoss(
                f"batch of epoch {batch.epoch} step {batch.step} names slot "
                f"{batch.slot} of {where}")
        # Every tensor keeps the slot, and the slot the ring, alive.
        slot = _cuda.Slot(ring, batch.slot)
        base = batch.slot * ring.slot_bytes
        where = f"slot {batch.slot} of the cuda_ipc ring"
        return {name: ring.tensor(base + offset, dtype, shape, slot)
                for name, dtype, shape, _, offset in _layout(
                    batch, ring.slot_bytes, where)}, slot

    @property
    def slots(self) -> int:
        return self._ring.slots if self._ring is not None else 0

    def fence(self) -> Optional[Fence]:
        return _cuda.fence(self.device)

    def close(self) -> None:
        # Unmapped once the last tensor of its batches is gone (see
        # _cuda.DeviceRing).
        self._ring = None


# Every transport this client reads, in `auto`'s order of preference: the
# one list that the tables below derive from.
_PREFERRED: Tuple[Type[Transport], ...] = (
    CudaIpcTransport, ShmTransport, GrpcTransport)

# By name, in the order of the wire's Transport enum.
TRANSPORTS: Dict[str, Type[Transport]] = {
    t.name: t for t in sorted(_PREFERRED, key=lambda t: int(t.wire))}
CHOICES = ("auto",) + tuple(TRANSPORTS)
AUTO_PREFERENCE = tuple(t.name for t in _PREFERRED)
# By the wire's Transport; a header that names none is from a daemon that
# knew only grpc.
NAMES: Dict[int, str] = {
    pb.TRANSPORT_UNSPECIFIED: GrpcTransport.name,
    **{int(t.wire): t.name for t in _PREFERRED}}


def on_device(name: str) -> bool:
    """Whether transport `name` gives tensors on the GPU (False for `auto`
    and unknown names)."""
    return name in TRANSPORTS and TRANSPORTS[name].on_device


def holds_slots(name: str) -> bool:
    """Whether a batch of transport `name` holds a slot of the daemon's
    until released (its arrays view memory the daemon reuses)."""
    return (name in TRANSPORTS and TRANSPORTS[name].ack_on_release
            and not TRANSPORTS[name].on_device)


def is_local(address: str) -> bool:
    """True when `address` names a daemon on this node (a unix socket)."""
    return address.startswith("unix:") or address.startswith("unix-abstract:")


def candidates(name: str, address: str,
               cuda_device: Optional[int] = None) -> List[str]:
    """The transports to try, in order, for a requested transport name and
    a consumer on `cuda_device` (None: no GPU). ValueError for an unknown
    name; FailedPrecondition saying why for one this process cannot use
    (for `auto`, make() says it when that candidate's turn comes)."""
    if name not in CHOICES:
        raise ValueError(f"transport {name!r} is unknown; use one of "
                         f"{', '.join(CHOICES)}")
    if name == "auto":
        return [n for n in AUTO_PREFERENCE
                if TRANSPORTS[n].suits(address, cuda_device)]
    _check_available(name, cuda_device)
    return [name]


def _check_available(name: str, cuda_device: Optional[int]) -> None:
    why = TRANSPORTS[name].unavailable(cuda_device)
    if why is not None:
        others = "', '".join(n for n in CHOICES if n != name)
        raise errors.FailedPrecondition(
            f"transport '{name}' cannot be used here: {why}; use '{others}'")


def make(name: str, cuda_device: Optional[int] = None) -> Transport:
    """The transport `name` for a consumer on `cuda_device`;
    FailedPrecondition saying why when this process cannot use it."""
    _check_available(name, cuda_device)
    return TRANSPORTS[name](cuda_device)
