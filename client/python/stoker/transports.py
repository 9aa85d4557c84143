"""Transports: how a batch's tensor bytes reach this process.

The stream protocol is the same for every transport; what differs is where
a Batch's tensors live (in the message payload, a shared-memory slot, a GPU
buffer) and what the client gives back when it is done with them. A
Transport is the small piece that knows this: it adds its fields to the open
request, checks the daemon's header (and maps what it names), turns each
Batch into arrays, and is closed with its stream.

This client reads `grpc` and `shm`. `cuda_ipc` is declared, not yet
implemented: asking for it by name raises FailedPrecondition before
anything is sent, and `auto` skips it. `auto` negotiates: it asks for each
implemented candidate in order of preference (cuda_ipc, shm, grpc) and
takes the first that the daemon grants; a FAILED_PRECONDITION or
PERMISSION_DENIED answer (e.g. the daemon would not hand over the shm ring
to this user) moves on to the next, and Stream.transport says where it
ended. Adding a transport is one class here with `implemented = True`.

A transport's `arrays(response)`, for a batch response, returns ({name:
array}, owner). For a transport with `ack_on_release`, `owner` is an
ndarray that every array of the batch views (their numpy base): the stream
acknowledges the batch when the batch is released, or when the owner is
collected, which happens only once the Batch and every array and tensor
viewing it are gone. Otherwise owner is None and the batch is acknowledged
when handed over.
"""
import mmap
import os
import socket
from typing import Any, Dict, List, Optional, Tuple, Type, Union

import numpy as np
import numpy.typing as npt

from . import errors
from ._proto.stoker.v1 import stoker_pb2 as pb
from ._wire import Response

Array = npt.NDArray[Any]
# What Transport.arrays returns: the batch's arrays by name, and their owner.
Arrays = Tuple[Dict[str, Array], Optional["npt.NDArray[np.uint8]"]]



def _numpy_dtypes() -> Dict[int, "np.dtype[Any]"]:
    """The numpy dtype of each DType, derived from its name so that the two
    cannot drift: DTYPE_FLOAT32 is numpy's float32, little-endian (the byte
    order of every tensor the daemon sends, whatever this host's)."""
    return {value: np.dtype(name[len("DTYPE_"):].lower()).newbyteorder("<")
            for name, value in pb.DType.items()
            if value != pb.DTYPE_UNSPECIFIED}


DTYPES: Dict[int, "np.dtype[Any]"] = _numpy_dtypes()

NAMES: Dict[int, str] = {
    pb.TRANSPORT_UNSPECIFIED: "grpc",
    pb.TRANSPORT_GRPC: "grpc",
    pb.TRANSPORT_SHM: "shm",
    pb.TRANSPORT_CUDA_IPC: "cuda_ipc",
}


def dtype_of(value: int) -> "np.dtype[Any]":
    try:
        return DTYPES[value]
    except KeyError:
        raise errors.Internal(
            f"the daemon sent unknown dtype {value}") from None


class Transport:
    """One stream's transport. Not thread-safe; used by its Stream only."""

    name = ""
    wire: "pb.Transport" = pb.TRANSPORT_UNSPECIFIED
    implemented = True
    ack_on_release = False
    # Whether the stream's messages are worth receiving on a thread of their
    # own while the consumer works (see _call.Call).
    read_ahead = True

    @classmethod
    def suits(cls, address: str) -> bool:
        """Whether `auto` should try this transport for a daemon at
        `address`."""
        return True

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
        """({name: numpy array}, owner) for a parsed batch Response (see
        _wire); see the module comment for owner."""
        raise NotImplementedError

    @property
    def slots(self) -> int:
        """Slots of the stream's own ring, for a transport with
        `ack_on_release`; 0 otherwise."""
        return 0

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


def _views(batch: pb.Batch, buffer: Union[bytes, Array], base: int,
           size: int, where: str) -> Dict[str, Array]:
    """{name: read-only array} of the batch's tensors, each a view of
    buffer[base + offset:...]; DataLoss when one does not fit in `size`
    bytes."""
    out = {}
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
        out[t.name] = np.frombuffer(
            buffer, dtype=dtype, count=count,
            offset=base + t.offset).reshape(shape)
    return out


class _NotYetTransport(Transport):
    """A transport of the protocol that this client cannot read yet."""

    implemented = False

    def attach(self, header: pb.StreamHeader) -> None:
        super().attach(header)
        raise errors.FailedPrecondition(
            f"the daemon granted transport {self.name}, which this Python "
            f"client cannot read yet; use transport 'grpc' or 'auto'")


class ShmTransport(Transport):
    """Tensors lie in a slot of the stream's shared-memory ring, which this
    transport maps read-only when the stream opens; each array is a view
    of the slot (no copy). The slot stays the client's until the batch is
    released (see Stream and Batch.release). A stream that joined a shared
    run also maps the run's ring, where the run lends it batches in place
    (Batch.in_shared_ring)."""

    name = "shm"
    wire = pb.TRANSPORT_SHM
    ack_on_release = True
    read_ahead = False  # A message is the slot and layout: small.

    def __init__(self) -> None:
        # in_shared_ring -> (mapping, slots, slot_bytes)
        self._rings: Dict[bool, Tuple[mmap.mmap, int, int]] = {}

    @classmethod
    def suits(cls, address: str) -> bool:
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

    def close(self) -> None:
        # Unmapped once the last array of its batches is gone (a mapping
        # with views cannot be closed; dropping it is enough).
        self._rings = {}


def map_ring(ring: pb.ShmRing) -> mmap.mmap:
    """Fetches a stream's ring descriptor from the daemon's fd socket (see
    ShmRing in stoker.proto) and maps it read-only. FailedPrecondition if
    the socket cannot be reached, PermissionDenied if the daemon refuses to
    hand the descriptor over."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.settimeout(10.0)
            sock.connect(ring.fd_socket)
            sock.sendall(ring.token)
            _, fds, _, _ = socket.recv_fds(sock, 1, 1)
        except OSError as e:
            raise errors.FailedPrecondition(
                f"cannot reach the shm socket {ring.fd_socket}: "
                f"{e.strerror or e}") from None
    finally:
        sock.close()
    if not fds:
        raise errors.PermissionDenied(
            f"stokerd did not hand over the shared-memory ring on "
            f"{ring.fd_socket}: this process's user is not the daemon's and "
            f"not in its socket group")
    for extra in fds[1:]:
        os.close(extra)
    try:
        return mmap.mmap(fds[0], ring.slots * ring.slot_bytes,
                         flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    except (OSError, ValueError, OverflowError) as e:
        raise errors.ResourceExhausted(
            f"cannot map the shared-memory ring ({ring.slots} slots of "
            f"{ring.slot_bytes} bytes): {e}") from None
    finally:
        os.close(fds[0])


class CudaIpcTransport(_NotYetTransport):
    name = "cuda_ipc"
    wire = pb.TRANSPORT_CUDA_IPC

    def __init__(self, gpu_uuid: str = "") -> None:
        self.gpu_uuid = gpu_uuid

    @classmethod
    def suits(cls, address: str) -> bool:
        # Needs the trainer's GPU, which a bare Stream does not know.
        return False

    def prepare(self, open_request: pb.OpenStream) -> None:
        super().prepare(open_request)
        open_request.gpu_uuid = self.gpu_uuid


TRANSPORTS: Dict[str, Type[Transport]] = {
    "grpc": GrpcTransport,
    "shm": ShmTransport,
    "cuda_ipc": CudaIpcTransport,
}

CHOICES = ("auto",) + tuple(TRANSPORTS)
AUTO_PREFERENCE = ("cuda_ipc", "shm", "grpc")


def is_local(address: str) -> bool:
    """True when `address` names a daemon on this node (a unix socket)."""
    return address.startswith("unix:") or address.startswith("unix-abstract:")


def candidates(name: str, address: str) -> List[str]:
    """The transports to try, in order, for a requested transport name.
    ValueError for an unknown name; FailedPrecondition for one this client
    cannot read yet."""
    if name not in CHOICES:
        raise ValueError(f"transport {name!r} is unknown; use one of "
                         f"{', '.join(CHOICES)}")
    if name == "auto":
        return [n for n in AUTO_PREFERENCE
                if TRANSPORTS[n].implemented and TRANSPORTS[n].suits(address)]
    if not TRANSPORTS[name].implemented:
        raise errors.FailedPrecondition(
            f"transport '{name}' is not implemented in this Python client "
            f"yet; use 'shm', 'grpc' or 'auto'")
    return [name]


def make(name: str) -> Transport:
    return TRANSPORTS[name]()
