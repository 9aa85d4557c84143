"""Call: one Stream RPC, with acks sent on another thread.

Requests go through a queue that gRPC's sending thread drains, so acks flow
while the consumer waits for batches. Responses are read ahead by a thread
of the call, or read by the consumer itself; see Call.
"""
import queue
import threading

import grpc

from . import errors


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

    def __init__(self, client, first_request, read_ahead=True):
        self._requests = queue.SimpleQueue()
        self._responses = queue.SimpleQueue()
        self._closed = False
        self._rpc = client.open_call(self._drain(first_request))
        self._reader = None
        if read_ahead:
            self._reader = threading.Thread(target=self._read_ahead,
                                            name="stoker-stream-reader",
                                            daemon=True)
            self._reader.start()

    def _drain(self, first):
        yield first
        while True:
            request = self._requests.get()
            if request is None:
                return
            yield request

    def _read_ahead(self):
        try:
            for response in self._rpc:
                self._responses.put((response, None))
            end = StopIteration()
        except grpc.RpcError as e:
            end = e
        except Exception as e:  # Anything else ends the call too.
            end = errors.Internal(f"reading the stream failed: {e!r}")
        self._responses.put((None, end))

    def read(self, timeout=None):
        """The next parsed response; StopIteration at the end (status OK);
        grpc.RpcError for any other status; queue.Empty after `timeout`
        seconds without one (`timeout` only with read-ahead)."""
        if self._reader is None:
            return next(self._rpc)
        response, end = self._responses.get(timeout=timeout)
        if end is not None:
            self._responses.put((None, end))  # Every later read ends too.
            raise end
        return response

    def send(self, request):
        self._requests.put(request)

    def close(self):
        """Half-closes and cancels. Idempotent; safe from any thread. Also
        ends the generator that gRPC's sending thread waits on, and so the
        reader."""
        if not self._closed:
            self._closed = True
            self._requests.put(None)
            self._rpc.cancel()
