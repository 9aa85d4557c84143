"""The descriptors of a stream's rings, fetched from the daemon's descriptor
socket (ShmRing and CudaIpcRing in local_transports.proto), and the shm ring
mapped."""
import mmap
import os
import socket

from . import errors
from ._proto.stoker.v1 import stoker_pb2 as pb


def fetch_fd(fd_socket: str, token: bytes, what: str) -> int:
    """Fetches the descriptor of a stream's ring (`what`) from the daemon's
    descriptor socket, as ShmRing in local_transports.proto says: connects,
    sends the token, receives the descriptor, which the caller then owns.
    FailedPrecondition if the socket cannot be reached, PermissionDenied if
    the daemon refuses to hand the descriptor over."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.settimeout(10.0)
            sock.connect(fd_socket)
            sock.sendall(token)
            _, fds, _, _ = socket.recv_fds(sock, 1, 1)
        except OSError as e:
            raise errors.FailedPrecondition(
                f"cannot reach the descriptor socket {fd_socket} for {what}: "
                f"{e.strerror or e}") from None
    finally:
        sock.close()
    if not fds:
        raise errors.PermissionDenied(
            f"stokerd did not hand over {what} on {fd_socket}: this "
            f"process's user is not the daemon's and not in its socket group")
    for extra in fds[1:]:
        os.close(extra)
    return fds[0]


def map_ring(ring: pb.ShmRing) -> mmap.mmap:
    """Fetches a stream's shm ring (see fetch_fd) and maps it read-only;
    ResourceExhausted when it cannot be mapped."""
    fd = fetch_fd(ring.fd_socket, ring.token, "the shared-memory ring")
    try:
        return mmap.mmap(fd, ring.slots * ring.slot_bytes,
                         flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    except (OSError, ValueError, OverflowError) as e:
        raise errors.ResourceExhausted(
            f"cannot map the shared-memory ring ({ring.slots} slots of "
            f"{ring.slot_bytes} bytes): {e}") from None
    finally:
        os.close(fd)
