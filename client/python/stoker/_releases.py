"""Where a stream's acknowledgements go once its batches are released: the
current call, and a fence (a CUDA event) to wait for first where the
consumer's GPU may still read the batch (see stoker.stream)."""
import collections
import threading
from typing import Callable, Deque, List, Optional, Tuple, Union

from . import transports
from ._call import Call, NoticeCall
from ._proto.stoker.v1 import stoker_pb2 as pb

# A Stream call: over shm with a notice socket, a NoticeCall.
AnyCall = Union[Call, NoticeCall]
# What a release asks for the fence its ack must wait for (Transport.fence).
FenceSource = Callable[[], Optional[transports.Fence]]


class Releases:
    """Where released shm batches send their acks: the current call, and a
    generation that changes with every call (or close), so that a batch of
    an earlier connection's ring never acks into a later one. Shared with
    the batches, which may outlive the stream. `state` is replaced as a
    whole, so a release needs no lock (it may run in a finalizer, on any
    thread); Call.send is thread-safe.

    Sending a message costs this process more than anything else it does
    per batch (gRPC's sending thread wakes twice, its polling thread once),
    so where the daemon takes several acks in one message (header field
    ack_list) a release only queues its ack, and the acks go out in pairs.
    The stream flushes a lone ack before it waits for a batch whenever
    keeping it back would leave the daemon fewer than `prefetch` slots to
    fill (see Stream._read): a held-back ack is one slot the daemon cannot
    reuse yet. The queue is a deque: appends and pops are atomic, so a
    release on another thread never loses an ack to a flush.

    Where the consumer's GPU may still read a released batch (cuda_ipc, or
    copies from a page-locked shm ring), the release records a fence (a
    CUDA event on the GPU's current stream) and its ack waits in `fenced`
    until the fence has completed: settle() sends the acks whose fences
    have, oldest first, and waits for fences when told to. Fences are
    checked by the stream's thread (and close()), never by a release.
    """

    __slots__ = ("state", "pending", "fenced", "pair", "_settling")

    PAIR = 2  # Acks sent together.

    def __init__(self, pair: int = PAIR) -> None:
        # Acks sent together: 1 sends each at its release (a stream whose
        # ring has no slot for a held-back ack, see Stream's copy_out).
        self.pair = pair
        # (generation, the call acks go to, whether it takes AckLists)
        self.state: Tuple[int, Optional[AnyCall], bool] = (0, None, False)
        self.pending: Deque[pb.Ack] = collections.deque()
        # (generation, fence, ack) of releases waiting for their fence.
        self.fenced: Deque[Tuple[int, transports.Fence, pb.Ack]] = \
            collections.deque()
        self._settling = threading.Lock()

    @property
    def generation(self) -> int:
        return self.state[0]

    def attach(self, call: Optional[AnyCall], ack_list: bool = False) -> None:
        self.state = (self.state[0] + 1, call, ack_list)
        self.pending = collections.deque()
        self.fenced = collections.deque()

    def release(self, generation: int, ack: pb.Ack,
                fence: Optional[FenceSource] = None) -> None:
        """Acknowledges a released batch, once the fence that `fence`
        gives (if any) has completed."""
        current, call, ack_list = self.state
        if current != generation or call is None:
            return
        waits_for = fence() if fence is not None else None
        if waits_for is not None:
            self.fenced.append((generation, waits_for, ack))
            return
        if not ack_list:
            call.send(pb.StreamRequest(ack=ack))
            return
        pending = self.pending
        pending.append(ack)
        if len(pending) >= self.pair:
            self.flush()

    def flush(self) -> None:
        """Sends the queued acks, in one message."""
        _, call, _ = self.state
        pending = self.pending
        acks: List[pb.Ack] = []
        while True:
            try:
                acks.append(pending.popleft())
            except IndexError:
                break
        if acks and call is not None:
            call.send(pb.StreamRequest(acks=pb.AckList(acks=acks)))

    def settle(self, wait: int = 0) -> None:
        """Sends the ack of each fenced release whose fence has completed,
        oldest first, waiting for up to `wait` fences that have not."""
        with self._settling:
            fenced = self.fenced
            while fenced:
                generation, fence, ack = fenced[0]
                if not fence.query():
                    if wait <= 0:
                        return
                    fence.synchronize()
                    wait -= 1
                fenced.popleft()
                self.release(generation, ack)
