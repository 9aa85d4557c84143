"""Call: one Stream RPC, with acks sent on another thread; NoticeCall: one
over shm whose batches and acks go on the notice socket.

Requests go through a queue that gRPC's sending thread drains, so acks flow
while the consumer waits for batches. Responses are read ahead by a thread
of the call, or read by the consumer itself; see Call.
"""
import queue
import socket
import threading
from typing import Any, Iterator, List, Optional, Protocol, Tuple

import grpc
from google.protobuf.message import DecodeError

from . import errors
from ._proto.stoker.v1 import stoker_pb2 as pb
from ._wire import Response
from .info import DatasetInfo


class Connection(Protocol):
    """What a stream needs of its connection to the daemon; stoker.Client
    is one."""

    @property
    def address(self) -> str:
        """Where the daemon is: ``unix:PATH`` or ``HOST:PORT``."""

    def wait_ready(self, deadline: float) -> None:
        """Waits until connected; Unavailable at the monotonic deadline."""

    def check_socket(self) -> None:
        """Unavailable at once when a unix socket address names no file."""

    def open_call(self, requests: Iterator[pb.StreamRequest]) -> Any:
        """Starts a Stream call that sends `requests`; returns gRPC's
        call (an iterator of responses with cancel())."""

    def datasets(self) -> List[DatasetInfo]:
        """The daemon's datasets (ListDatasets)."""


# What the reader thread hands over: (response, None), or (None, how the
# call ended: StopIteration, grpc.RpcError or a StokerError).
_Read = Tuple[Optional[Response], Optional[BaseException]]


class Call:
    """One Stream RPC: requests go through a queue that gRPC's sending
    thread drains; responses are read ahead by a thread of this call when
    `read_ahead`, else read by the caller of read().

    gRPC Python receives a message only when asked for it, and assembling a
    large one costs CPU time (tens of ms for a 40 MB batch). Reading ahead
    moves that work off the consumer's wait: while the trainer computes, the
    next batch is already being received. The read-ahead is bounded by the
    daemon's flow control: it sends at most `prefetch` batches that the
    consumer has not acknowledged. A small message (an shm batch is a few
    hundred bytes of slot and layout) has nothing worth overlapping, and
    the reader thread's wakeup and hand-over would be most of what it costs
    the trainer, so such a call is read on the consumer's thread.
    """

    def __init__(self, client: Connection, first_request: pb.StreamRequest,
                 read_ahead: bool = True) -> None:
        self._requests: "queue.SimpleQueue[Optional[pb.StreamRequest]]" = \
            queue.SimpleQueue()
        self._responses: "queue.SimpleQueue[_Read]" = queue.SimpleQueue()
        self._closed = False
        self._rpc = client.open_call(self._drain(first_request))
        self._reader: Optional[threading.Thread] = None
        if read_ahead:
            self._reader = threading.Thread(target=self._read_ahead,
                                            name="stoker-stream-reader",
                                            daemon=True)
            self._reader.start()

    def _drain(self, first: pb.StreamRequest) -> Iterator[pb.StreamRequest]:
        yield first
        while True:
            request = self._requests.get()
            if request is None:
                return
            yield request

    def _read_ahead(self) -> None:
        end: BaseException
        try:
            for response in self._rpc:
                self._responses.put((response, None))
            end = StopIteration()
        except grpc.RpcError as e:
            end = e
        except Exception as e:  # Anything else ends the call too.
            end = errors.Internal(f"reading the stream failed: {e!r}")
        self._responses.put((None, end))

    def read(self, timeout: Optional[float] = None) -> Response:
        """The next parsed response; StopIteration at the end (status OK);
        grpc.RpcError for any other status; queue.Empty after `timeout`
        seconds without one (`timeout` only with read-ahead)."""
        if self._reader is None:
            return next(self._rpc)  # type: ignore[no-any-return]
        response, end = self._responses.get(timeout=timeout)
        if end is not None:
            self._responses.put((None, end))  # Every later read ends too.
            raise end
        return response  # type: ignore[return-value]

    def send(self, request: pb.StreamRequest) -> None:
        self._requests.put(request)

    def close(self) -> None:
        """Half-closes and cancels. Idempotent; safe from any thread. Also
        ends the generator that gRPC's sending thread waits on, and so the
        reader."""
        if not self._closed:
            self._closed = True
            self._requests.put(None)
            self._rpc.cancel()


class NoticeCall:
    """A Stream call over shm whose batches come on the notice socket
    (NoticeSocket in local_transports.proto): the call carried the header
    and will carry the final status; batches are read, and acks written, on
    the socket by the consumer's own thread. A message on the call costs this
    process several thread hand-overs inside grpcio; a frame on the socket
    costs one system call.

    Same interface as Call. read() gives the socket's frames, then, once
    the daemon has shut the socket down, what the call says (StopIteration
    for OK, grpc.RpcError otherwise). send() may be called from any thread.
    """

    # The bound both sides keep (local_transports.proto: NoticeFrame).
    MAX_FRAME = int(pb.NOTICE_FRAME_MAX_BYTES)

    def __init__(self, call: Call, sock: socket.socket,
                 path: str = "") -> None:
        self._call = call
        self._sock = sock
        self._path = path
        self._truncated = False
        self._send_lock = threading.Lock()
        self._buffer = bytearray(64 << 10)
        self._start = self._end = 0
        self._ended = False

    @classmethod
    def connect(cls, call: Call, notices: pb.NoticeSocket) -> "NoticeCall":
        """Connects to the daemon's notice socket with the header's token.
        FailedPrecondition if it cannot be reached, PermissionDenied if the
        daemon refuses the token."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(10.0)
            sock.connect(notices.path)
            sock.sendall(notices.token)
            answer = sock.recv(1)
            sock.settimeout(None)
        except OSError as e:
            sock.close()
            raise errors.FailedPrecondition(
                f"cannot reach the notice socket {notices.path}: "
                f"{e.strerror or e}") from None
        if answer != b"\x01":
            sock.close()
            raise errors.PermissionDenied(
                f"stokerd refused this stream's notice socket on "
                f"{notices.path}")
        return cls(call, sock, notices.path)

    def read(self, timeout: Optional[float] = None) -> Response:
        if not self._ended:
            frame = self._next_frame()
            if frame is not None:
                return self._parse(frame)
            self._ended = True
            self._truncated = self._end > self._start
            self._sock.close()
        try:
            response = self._call.read()
        except StopIteration:
            if self._truncated:
                raise errors.DataLoss(
                    f"the notice socket {self._path} ended inside a frame, "
                    f"yet the stream ended normally") from None
            raise
        raise errors.Internal(
            "the daemon sent a message on the call after the header of a "
            "stream with a notice socket" if response.batch is not None
            else "the daemon sent a second stream header")

    def _next_frame(self) -> Optional[bytes]:
        """The bytes of the next frame, or None at the end of the socket."""
        buffer = self._buffer
        while True:
            available = self._end - self._start
            if available >= 4:
                length = int.from_bytes(
                    buffer[self._start:self._start + 4], "little")
                if length > self.MAX_FRAME:
                    raise errors.DataLoss(
                        f"a frame of {length} bytes on the notice socket "
                        f"(at most {self.MAX_FRAME})")
                if available >= 4 + length:
                    begin = self._start + 4
                    self._start = begin + length
                    return bytes(buffer[begin:self._start])
                if 4 + length > len(buffer):
                    buffer.extend(bytes(4 + length - len(buffer)))
            if self._start > 0:
                buffer[:available] = buffer[self._start:self._end]
                self._start, self._end = 0, available
            try:
                got = self._sock.recv_into(memoryview(buffer)[self._end:])
            except OSError:
                got = 0  # Closed under us (close()), or broken: the call says.
            if got == 0:
                return None
            self._end += got

    @staticmethod
    def _parse(frame: bytes) -> Response:
        try:
            message = pb.StreamResponse.FromString(frame)
        except DecodeError as e:
            raise errors.DataLoss(
                f"a frame on the notice socket does not parse: {e}") from None
        if message.WhichOneof("kind") != "batch":
            raise errors.Internal("the daemon sent a frame without a batch "
                                  "on the notice socket")
        return Response(batch=message.batch, raw=frame)

    def send(self, request: pb.StreamRequest) -> None:
        body = request.SerializeToString()
        frame = len(body).to_bytes(4, "little") + body
        try:
            with self._send_lock:
                self._sock.sendall(frame)
        except OSError:
            pass  # The stream ended; reading says how.

    def close(self) -> None:
        """Wakes a read waiting on the socket and cancels the call.
        Idempotent; safe from any thread."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()
        self._call.close()
