"""Transports: how a batch's tensor bytes reach this process.

The stream protocol is the same for every transport; what differs is where
a Batch's tensors live (in the message payload, a shared-memory slot, a GPU
buffer) and what the client gives back when it is done with them. A
Transport is the small piece that knows this: it adds its fields to the open
request, checks the daemon's header (and maps what it names), turns each
Batch into arrays, and is closed with its stream.

This client reads `grpc` only. `shm` and `cuda_ipc` are declared, not yet
implemented: asking for them by name raises FailedPrecondition before
anything is sent (so the daemon sets up no ring for a client that cannot
read it), and `auto` skips them. `auto` negotiates: it asks for each
implemented candidate in order of preference (cuda_ipc, shm, grpc) and
takes the first that the daemon grants; a FAILED_PRECONDITION answer moves
on to the next, and Stream.transport says where it ended. Adding a transport
is one class here with `implemented = True`.
"""
import numpy as np

from . import errors
from ._proto.stoker.v1 import stoker_pb2 as pb

DTYPES = {
    pb.DTYPE_UINT8: np.dtype(np.uint8),
    pb.DTYPE_INT64: np.dtype("<i8"),
    pb.DTYPE_FLOAT16: np.dtype("<f2"),
    pb.DTYPE_FLOAT32: np.dtype("<f4"),
}

NAMES = {
    pb.TRANSPORT_UNSPECIFIED: "grpc",
    pb.TRANSPORT_GRPC: "grpc",
    pb.TRANSPORT_SHM: "shm",
    pb.TRANSPORT_CUDA_IPC: "cuda_ipc",
}


def dtype_of(value):
    try:
        return DTYPES[value]
    except KeyError:
        raise errors.Internal(
            f"the daemon sent unknown dtype {value}") from None


class Transport:
    """One stream's transport. Not thread-safe; used by its Stream only."""

    name = ""
    wire = pb.TRANSPORT_UNSPECIFIED
    implemented = True

    @classmethod
    def suits(cls, address):
        """Whether `auto` should try this transport for a daemon at
        `address`."""
        return True

    def prepare(self, open_request):
        """Adds this transport's fields to an OpenStream message."""
        open_request.transport = self.wire

    def attach(self, header):
        """Called with the daemon's StreamHeader. Raises FailedPrecondition
        when this client cannot use what the daemon granted."""
        granted = NAMES.get(header.transport, str(header.transport))
        if granted != self.name:
            raise errors.FailedPrecondition(
                f"asked for transport {self.name}, the daemon granted "
                f"{granted}")

    def arrays(self, response):
        """{name: numpy array} for a parsed batch Response (see _wire)."""
        raise NotImplementedError

    def close(self):
        pass


class GrpcTransport(Transport):
    """Tensors travel in Batch.payload; each array is a view of the bytes
    gRPC received (read-only, no copy)."""

    name = "grpc"
    wire = pb.TRANSPORT_GRPC

    def attach(self, header):
        if header.transport not in (pb.TRANSPORT_GRPC,
                                    pb.TRANSPORT_UNSPECIFIED):
            super().attach(header)

    def arrays(self, response):
        batch, raw = response.batch, response.raw
        base, size = response.payload_offset, response.payload_length
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
                    f"{batch.step} does not fit the payload: offset "
                    f"{t.offset}, length {t.length}, shape {list(shape)} "
                    f"{dtype}, payload {size} bytes")
            out[t.name] = np.frombuffer(
                raw, dtype=dtype, count=count,
                offset=base + t.offset).reshape(shape)
        return out


class _NotYetTransport(Transport):
    """A transport of the protocol that this client cannot read yet."""

    implemented = False

    def attach(self, header):
        super().attach(header)
        raise errors.FailedPrecondition(
            f"the daemon granted transport {self.name}, which this Python "
            f"client cannot read yet; use transport 'grpc' or 'auto'")


class ShmTransport(_NotYetTransport):
    name = "shm"
    wire = pb.TRANSPORT_SHM

    @classmethod
    def suits(cls, address):
        return is_local(address)


class CudaIpcTransport(_NotYetTransport):
    name = "cuda_ipc"
    wire = pb.TRANSPORT_CUDA_IPC

    def __init__(self, gpu_uuid=""):
        self.gpu_uuid = gpu_uuid

    @classmethod
    def suits(cls, address):
        # Needs the trainer's GPU, which a bare Stream does not know.
        return False

    def prepare(self, open_request):
        super().prepare(open_request)
        open_request.gpu_uuid = self.gpu_uuid


TRANSPORTS = {
    "grpc": GrpcTransport,
    "shm": ShmTransport,
    "cuda_ipc": CudaIpcTransport,
}

CHOICES = ("auto",) + tuple(TRANSPORTS)
AUTO_PREFERENCE = ("cuda_ipc", "shm", "grpc")


def is_local(address):
    """True when `address` names a daemon on this node (a unix socket)."""
    return address.startswith("unix:") or address.startswith("unix-abstract:")


def candidates(name, address):
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
            f"yet; use 'grpc' or 'auto'")
    return [name]


def make(name):
    return TRANSPORTS[name]()
