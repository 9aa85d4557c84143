"""Stream: the batches of one request, in order, across daemon restarts.

One Stream call carries the protocol of proto/stoker/v1/stoker.proto: the
client sends `open`, the daemon answers a header and then batches; the
client acknowledges each batch, with how long the user waited for it (the
data stall) and how long the user spent since the previous one. Over grpc
a batch is acknowledged when the stream hands it to its user; over shm when
the user releases it (Batch.release(), or when the Batch and every array
viewing its slot are collected), since until then the slot is the user's.
The daemon keeps at most `prefetch` (shm: `prefetch + hold`) batches
unacknowledged, so acks must flow while batches are read: requests go
through a queue that gRPC drains on its own thread, and a release may
queue its ack from any thread. Over shm, acks go out two to a message
where the daemon allows it (see _releases.Releases), and where the daemon grants a
notice socket, batches and acks travel there instead of on the call (see
_call.NoticeCall). Over cuda_ipc (tensors on the GPU), as over shm; and
where the consumer's GPU may still read a released batch, its ack waits
for that work (a fence; see _releases.Releases).

The stream tracks its position, the (epoch, step) of the next batch. When
the connection drops (UNAVAILABLE: the daemon stopped, crashed or
restarted, or it ended the stream because the dataset's source failed to
deliver a record), the next read reconnects with backoff and reopens at the
position, so the user sees every batch once, in order. The
`reconnect_timeout` window runs from the first failure and only a batch
delivered resets it: once it is over, the stream raises Unavailable with
the last error (the daemon's, which names the dataset, the source URL and
the HTTP status when the source failed), however often a reopen
succeeded in between.
"""
import gc
import time
import weakref
from typing import List, Optional, Tuple

import grpc

from . import errors, transports
from ._proto.stoker.v1 import stoker_pb2 as pb
from ._call import Call, Connection, NoticeCall
from ._releases import AnyCall, Releases
from ._staging import StagingWatch
from ._wire import Response
from .batch import Batch, pair_ragged
from .info import StreamInfo, TensorSpec
from .request import Position, StreamRequest



class Stream:
    """An iterator of stoker.Batch, opened by Client.stream().

    ``position`` is the (epoch, step) of the next batch: open a new stream
    with ``start=position`` to continue exactly there. ``info`` holds the
    daemon's answer (steps_per_epoch, samples_per_epoch, num_samples,
    prefetch, outputs); ``transport`` the transport in use. With transport
    'auto' the stream asks for the best transport this client implements
    (shm for a daemon on a unix socket, then grpc) and falls back on
    FAILED_PRECONDITION or PERMISSION_DENIED (``transport_attempts`` lists
    what each try got). ``reconnects`` counts reconnections after the
    daemon went away.

    ``cuda_device`` (torch's GPU index, or None) is where the consumer uses
    the batches. With it, 'auto' tries cuda_ipc first on a daemon on this
    node (batches then hold torch tensors on that GPU: ``on_device``), and
    over shm the ring is page-locked for copies to it (``pinned``). Over
    both, a released batch is acknowledged only once the work queued on the
    GPU's current stream at release (kernels reading it, copies from it)
    has run, so the daemon never overwrites a slot under it.

    Over shm each Batch holds a slot of the ring until it is released:
    ``batch.release()``, or when the Batch and all arrays viewing it are
    garbage. The daemon sends at most ``prefetch + hold`` batches that are
    not released, so a consumer that keeps more than ``hold`` batches
    alive (beyond the one it works on) makes the stream wait; when every
    slot of the ring is held for over ``HELD_TIMEOUT`` seconds, so no batch
    can come, next() raises ResourceExhausted instead of waiting forever
    (release or copy batches, raise ``hold``, or use transport 'grpc').

    ``copy_out`` says that the consumer copies each batch out of its slot
    and releases it before it asks for the next (stoker.torch.Loader
    without zero_copy): the daemon then makes the ring ``prefetch`` slots,
    without the ``hold`` ones, and each ack goes out as the batch is
    released, not two to a message. The consumer must not page-lock the
    ring, so it is for a stream without ``cuda_device``.

    Iteration ends after the last batch of the last epoch (never with
    epochs=0) or after close(). A Stream is used by one thread at a time;
    close() may be called from any thread and interrupts a waiting read.
    """

    # Set by the first open, which __init__ makes (or raises).
    _info: StreamInfo

    def __init__(self, client: Connection, request: StreamRequest,
                 transport: str = "auto",
                 start: Tuple[int, int] = (0, 0),
                 reconnect_timeout: float = 30.0,
                 cuda_device: Optional[int] = None,
                 copy_out: bool = False) -> None:
        self._closed = True  # Until opened, for __del__.
        if not isinstance(request, StreamRequest):
            raise TypeError("request must be a StreamRequest")
        if copy_out and cuda_device is not None:
            raise ValueError("copy_out is for a consumer on the CPU: one "
                             "with a cuda_device page-locks the ring")
        self._copy_out = bool(copy_out)
        self._client = client
        self._request = request
        self.cuda_device = cuda_device
        self._candidates = transports.candidates(transport, client.address,
                                                 cuda_device)
        self._position = Position.of(start)
        if reconnect_timeout is None or reconnect_timeout < 0:
            raise ValueError(f"reconnect_timeout must be >= 0 seconds, got "
                             f"{reconnect_timeout!r}")
        self.reconnect_timeout = float(reconnect_timeout)
        self._call: Optional[AnyCall] = None
        # The open call's transport; until the first open, one that holds
        # nothing (close() closes it whatever it is).
        self._transport = transports.Transport()
        self._releases = Releases(pair=1 if copy_out else Releases.PAIR)
        # weakref.finalize of this ring's unreleased batches.
        self._held: List[weakref.finalize] = []
        self.reconnects = 0
        # Monotonic time of the first failure since the last batch
        # delivered (None: none), and the failures since: the
        # reconnect_timeout window runs from there.
        self._failing_since: Optional[float] = None
        self._failures = 0
        # (transport, None if granted else why not) for each try of `auto`.
        self.transport_attempts: List[Tuple[str, Optional[str]]] = []
        self._closed = False
        self._connect(opening=True)
        self._last_return = time.monotonic()

    @property
    def position(self) -> Position:
        return self._position

    @property
    def closed(self) -> bool:
        """True after close() or the end of the stream."""
        return self._closed

    @property
    def info(self) -> StreamInfo:
        return self._info

    @property
    def transport(self) -> str:
        return self._info.transport

    @property
    def notice_socket(self) -> bool:
        """True when batches come on the daemon's notice socket (shm)."""
        return isinstance(self._call, NoticeCall)

    @property
    def on_device(self) -> bool:
        """True when batches hold torch tensors on the GPU (cuda_ipc)."""
        return self._transport.on_device

    @property
    def pinned(self) -> bool:
        """True when the shm ring is page-locked for copies to
        cuda_device."""
        return self._transport.pinned

    @property
    def ring_slots(self) -> int:
        """Slots of the stream's ring (shm, cuda_ipc); 0 over grpc."""
        return self._transport.slots

    @property
    def request(self) -> StreamRequest:
        return self._request

    @property
    def address(self) -> str:
        return self._client.address

    def __iter__(self) -> "Stream":
        return self

    def __next__(self) -> Batch:
        asked = time.monotonic()
        while True:
            call = self._call
            if self._closed or call is None:
                raise StopIteration
            try:
                response = self._read(call)
            except StopIteration:
                self.close()
                raise
            except errors.ResourceExhausted:
                if self._closed:
                    raise StopIteration from None
                raise  # All shm slots held: the stream stays usable.
            except errors.StokerError:
                if self._closed:
                    # Closed by another thread while this one read: a close,
                    # whatever the read then met.
                    raise StopIteration from None
                self.close()
                raise
            except grpc.RpcError as e:
                self._drop_call()
                if self._closed:
                    raise StopIteration from None
                error = errors.from_stream_error(e)
                if not isinstance(error, errors.Unavailable):
                    self.close()
                    raise error from None
                self._failed(error)
                self._connect(opening=False, cause=error)
                self.reconnects += 1
                continue
            return self._deliver(call, response, asked)

    def _failed(self, error: errors.Unavailable) -> None:
        """Counts a stream that ended UNAVAILABLE; raises it, with what the
        stream was doing, once reconnect_timeout has passed since the first
        failure that no batch followed."""
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since = now
        self._failures += 1
        if now - self._failing_since < self.reconnect_timeout:
            return
        r, (epoch, step) = self._request, self._position
        self.close()
        raise errors.Unavailable(
            f"dataset '{r.dataset}' pipeline '{r.pipeline}' at epoch {epoch} "
            f"step {step}: the stream failed {self._failures} "
            f"time{'' if self._failures == 1 else 's'} without a batch in "
            f"{now - self._failing_since:.1f} s (reconnect_timeout "
            f"{self.reconnect_timeout:g} s); the last error: {error.message}"
        ) from None

    HELD_TIMEOUT = 1.0

    def _read(self, call: AnyCall) -> Response:
        """call.read(); over a ring (shm, cuda_ipc), first ResourceExhausted
        when every slot of the ring is held by unreleased batches for
        HELD_TIMEOUT seconds, so that none can arrive. While a slot is
        neither held nor waiting for its ack to be sent, the daemon can fill
        it, so the read that follows does not wait forever."""
        transport = self._transport
        if transport.ack_on_release:
            self._wait_for_a_free_slot(transport.slots)
        return call.read()

    def _wait_for_a_free_slot(self, slots: int) -> None:
        self._send_acks(slots)
        if len(self._held) < slots:
            return
        gc.collect()  # Batches kept alive only by a cycle.
        deadline = time.monotonic() + self.HELD_TIMEOUT
        while True:
            self._send_acks(slots)
            if len(self._held) < slots or self._closed:
                self._releases.flush()  # Released meanwhile, elsewhere.
                return
            if time.monotonic() > deadline:
                raise errors.ResourceExhausted(
                    f"all {slots} slots of the ring are held by "
                    f"unreleased batches, so the daemon can send no more: "
                    f"release() batches (or drop them) or copy what you "
                    f"keep, open the stream with a larger hold, or use "
                    f"transport 'grpc'")
            time.sleep(0.01)  # Another thread may release one.

    def _send_acks(self, slots: int) -> None:
        """Sends the acks the daemon needs to have a slot to fill: those of
        released batches whose fence has completed, and, when the held and
        fenced batches take every slot, those of the oldest fenced ones
        once their fences complete (waiting: no batch could come before).
        Acks held back (see Releases) must not cost the daemon its
        prefetch: the ring has prefetch + hold slots, so they are flushed
        once held + fenced + held back > hold (for copy_out, whose ring
        has no hold slots: at once)."""
        releases = self._releases
        self._held = [f for f in self._held if f.alive]
        releases.settle(
            wait=len(self._held) + len(releases.fenced) - slots + 1)
        # The daemon takes hold 0 as 1, and copy_out as 0.
        hold = 0 if self._copy_out else max(1, self._request.hold)
        if len(self._held) + len(releases.fenced) + len(
                releases.pending) > hold:
            releases.flush()

    def _deliver(self, call: AnyCall, response: Response,
                 asked: float) -> Batch:
        b = response.batch
        if b is None:
            self.close()
            raise errors.Internal("the daemon sent a second stream header")
        if (b.epoch, b.step) != self._position:
            self.close()
            raise errors.Internal(
                f"the daemon sent epoch {b.epoch} step {b.step}, expected "
                f"epoch {self._position.epoch} step {self._position.step}")
        transport = self._transport
        try:
            views, owner = transport.arrays(response)
            arrays = pair_ragged(views, b.tensors,
                                 read_offsets=not transport.on_device)
        except errors.StokerError:
            if self._closed:
                # Another thread closed the stream after this batch was
                # read, unmapping its ring: a close, not a lost batch.
                raise StopIteration from None
            self.close()
            raise
        now = time.monotonic()
        ack = pb.Ack(wait_seconds=now - asked,
                     busy_seconds=max(0.0, asked - self._last_return))
        ack.position.epoch, ack.position.step = b.epoch, b.step
        release = None
        if transport.ack_on_release:
            # The slot is the consumer's until the batch is released: by
            # Batch.release(), or once the owner (which every array of the
            # batch keeps alive) is collected.
            release = weakref.finalize(owner, Releases.release,
                                       self._releases,
                                       self._releases.generation, ack,
                                       transport.fence)
            release.atexit = False
            self._held.append(release)
        else:
            # Acknowledge on hand-over: frees a prefetch slot and reports
            # the consumer's data stall.
            call.send(pb.StreamRequest(ack=ack))
        self._last_return = now
        self._failing_since, self._failures = None, 0
        step = b.step + 1
        self._position = (Position(b.epoch + 1, 0)
                          if step >= self._info.steps_per_epoch
                          else Position(b.epoch, step))
        return Batch(arrays, b.epoch, b.step, list(b.sample_ids),
                     list(b.skipped_ids), release, shared=b.shared,
                     sample_reps=list(b.sample_reps),
                     skipped_reps=list(b.skipped_reps))

    def close(self) -> None:
        """Ends the stream and frees what the daemon holds for it; first
        waits for the GPU work that may read released batches (see
        cuda_device). Idempotent."""
        self._closed = True
        self._releases.settle(wait=len(self._releases.fenced))
        self._releases.attach(None)
        self._drop_call()
        self._transport.close()

    def _drop_call(self) -> None:
        call, self._call = self._call, None
        if call is not None:
            call.close()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            try:
                self.close()
            except Exception:  # E.g. at interpreter exit.
                pass

    def __repr__(self) -> str:
        r = self._request
        info: Optional[StreamInfo] = getattr(self, "_info", None)
        return (f"stoker.Stream({self.address!r}, dataset={r.dataset!r}, "
                f"pipeline={r.pipeline!r}, batch_size={r.batch_size}, "
                f"position={tuple(self._position)}, "
                f"transport={info.transport if info else None})")

    # Opening.

    def _connect(self, opening: bool,
                 cause: Optional[errors.StokerError] = None) -> None:
        """Opens the call at the position, retrying while the daemon is
        unavailable, until reconnect_timeout seconds after the first
        failure (see _failed), or after this call when opening."""
        deadline = (self._failing_since if self._failing_since is not None
                    else time.monotonic()) + self.reconnect_timeout
        backoff = 0.05
        last = cause
        while not self._closed:
            try:
                self._open(deadline)
                return
            except (errors.Unavailable, errors.DeadlineExceeded) as e:
                last = e
                if opening:
                    # A daemon that went away may come back at its socket;
                    # a socket that was never there is reported at once.
                    try:
                        self._client.check_socket()
                    except errors.Unavailable:
                        self.close()
                        raise
            except errors.StokerError:
                self.close()
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(backoff, remaining))
            backoff = min(backoff * 2, 1.0)
        if self._closed:
            raise errors.Cancelled("the stream was closed while connecting")
        r, (epoch, step) = self._request, self._position
        what = ("cannot reach stokerd at {} within {:g} s to open" if opening
                else "stokerd at {} did not come back within {:g} s to resume")
        self.close()
        raise errors.Unavailable(
            what.format(self.address, self.reconnect_timeout) +
            f" dataset '{r.dataset}' pipeline '{r.pipeline}' at epoch {epoch} "
            f"step {step}" + (f": {last.message}" if last else ""))

    def _open(self, deadline: float) -> None:
        """One open, trying each candidate transport in turn; raises the
        last refusal, or at once on any other error."""
        for i, name in enumerate(self._candidates):
            try:
                self._open_with(transports.make(name, self.cuda_device),
                                deadline)
            except (errors.FailedPrecondition, errors.PermissionDenied) as e:
                self.transport_attempts.append((name, str(e)))
                if i + 1 == len(self._candidates):
                    raise
                continue
            self.transport_attempts.append((name, None))
            # Later reconnects keep the transport that worked.
            self._candidates = [name]
            return

    def _open_with(self, transport: transports.Transport,
                   deadline: float) -> None:
        if getattr(self, "_info", None) is None:
            # Before the first open: waiting for a socket file that does not
            # exist would only time out.
            self._client.check_socket()
        self._client.wait_ready(deadline)
        rpc = Call(self._client,
                   self._request.to_proto(self._position, transport,
                                          self._copy_out),
                   read_ahead=transport.read_ahead)
        call: AnyCall = rpc
        try:
            # The daemon makes an open on a dataset it is still staging
            # wait; meanwhile the watch logs how far the copy is.
            with StagingWatch(self._client.datasets, self._request.dataset,
                              self.address):
                response = call.read()
        except StopIteration:
            call.close()
            raise errors.Unavailable(
                "the stream closed while opening") from None
        except grpc.RpcError as e:
            call.close()
            raise errors.from_stream_error(e) from None
        except errors.StokerError:
            call.close()
            raise
        try:
            if response.header is None:
                raise errors.Internal("the daemon sent no stream header")
            transport.attach(response.header)
            if response.header.HasField("notices"):
                call = NoticeCall.connect(rpc, response.header.notices)
        except errors.StokerError:
            transport.close()
            call.close()
            raise
        h = response.header
        # The dropped call's transport, once the GPU is done with its
        # released batches.
        self._releases.settle(wait=len(self._releases.fenced))
        self._transport.close()
        # Batches of an earlier call (an old ring) must not ack into this one.
        self._releases.attach(call, ack_list=h.ack_list)
        self._held = []
        self._call, self._transport = call, transport
        self._info = StreamInfo(
            num_samples=h.num_samples, steps_per_epoch=h.steps_per_epoch,
            samples_per_epoch=h.samples_per_epoch, prefetch=h.prefetch,
            transport=transport.name,
            outputs=tuple(TensorSpec.from_proto(o) for o in h.outputs),
            start=Position(h.start.epoch, h.start.step), shared=h.shared)
