"""Client: a connection to one stokerd, and what its config offers."""
import os
import time
from typing import Any, Iterator, List, Optional, Tuple

import grpc

from . import errors
from ._proto.stoker.v1 import stoker_pb2 as pb
from ._proto.stoker.v1 import stoker_pb2_grpc as pb_grpc
from ._wire import parse_response
from .info import DatasetInfo, PipelineInfo, TensorSpec
from .request import StreamRequest
from .stream import Stream

_STREAM_METHOD = "/{}/{}".format(
    pb.DESCRIPTOR.services_by_name["Stoker"].full_name,
    pb.DESCRIPTOR.services_by_name["Stoker"].methods_by_name["Stream"].name)

# As the C++ client: no message size limit (a batch can be large), and
# quick reconnects after a daemon restart.
_CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", -1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


def _read_pem(what: str, path: Optional[str]) -> Optional[bytes]:
    """The bytes of the PEM file at `path`, or None for no path."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ValueError(f"cannot read the TLS {what} '{path}': "
                         f"{e.strerror}") from None
    if b"-----BEGIN " not in data:
        raise ValueError(f"the TLS {what} '{path}' is not a PEM file "
                         f"(no -----BEGIN)")
    return data


# gRPC's name schemes: an address with one of these is not a file path.
_SCHEMES = ("unix:", "unix-abstract:", "dns:", "ipv4:", "ipv6:", "vsock:")


def socket_path(address: str) -> Optional[str]:
    """The file of a ``unix:PATH`` (or ``unix://PATH``) address, else None."""
    if address.startswith("unix://"):
        return address[len("unix://"):]
    if address.startswith("unix:"):
        return address[len("unix:"):]
    return None


def check_address(address: str) -> None:
    """Raises ValueError for an address that is a file path without
    ``unix:``: gRPC would take it for a host name and fail only after its
    connect timeout, with a DNS error."""
    if address.startswith(_SCHEMES):
        return
    if "/" in address or address.endswith(".sock") or os.path.exists(address):
        raise ValueError(
            f"address {address!r} looks like a file path: a unix socket is "
            f"addressed as 'unix:{address}' (a TCP address as 'HOST:PORT')")


class Client:
    """A connection to the stokerd at `address`: ``unix:/path/to.sock`` or
    ``host:port``. Nothing is sent until a method is called.

    `connect_timeout` (seconds) bounds how long datasets() and pipelines()
    wait for the daemon before raising Unavailable. Thread-safe: streams of
    one client may be used from different threads.

    TLS, for a daemon's TCP listener with ``listen.tls``: `tls_ca` is the CA
    file (PEM) that signed the daemon's certificate (None: the system's
    roots); `tls_cert` and `tls_key` are this client's certificate and key,
    for a daemon that requires them (``listen.tls.client_ca``);
    `tls_server_name` overrides the name checked in the daemon's
    certificate. Any of them, or ``tls=True``, turns TLS on. A file that
    cannot be read raises ValueError naming it.
    """

    def __init__(self, address: str, *, connect_timeout: float = 30.0,
                 tls: bool = False, tls_ca: Optional[str] = None,
                 tls_cert: Optional[str] = None,
                 tls_key: Optional[str] = None,
                 tls_server_name: Optional[str] = None) -> None:
        if not isinstance(address, str) or not address:
            raise ValueError(f"address must be 'unix:PATH' or 'HOST:PORT', "
                             f"got {address!r}")
        check_address(address)
        self.address = address
        self.connect_timeout = float(connect_timeout)
        options: List[Tuple[str, Any]] = list(_CHANNEL_OPTIONS)
        if tls or tls_ca or tls_cert or tls_key or tls_server_name:
            if bool(tls_cert) != bool(tls_key):
                raise ValueError("tls_cert and tls_key go together; got only "
                                 "one of them")
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read_pem("CA", tls_ca),
                private_key=_read_pem("client key", tls_key),
                certificate_chain=_read_pem("client certificate", tls_cert))
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override",
                                tls_server_name))
            self._channel = grpc.secure_channel(address, credentials,
                                                options=options)
        else:
            self._channel = grpc.insecure_channel(address, options=options)
        self._stub = pb_grpc.StokerStub(self._channel)
        self._stream_method = self._channel.stream_stream(
            _STREAM_METHOD,
            request_serializer=pb.StreamRequest.SerializeToString,
            response_deserializer=parse_response)

    def datasets(self) -> List[DatasetInfo]:
        """The datasets in the daemon's config: a list of DatasetInfo."""
        response = self._unary(self._stub.ListDatasets,
                               pb.ListDatasetsRequest())
        return [DatasetInfo(d.name, d.num_samples, d.num_shards, d.bytes,
                            tuple(d.classes), tuple(d.fields),
                            d.manifest_digest, d.content_digest, d.staging)
                for d in response.datasets]

    def dataset(self, name: str) -> DatasetInfo:
        """The DatasetInfo of `name`; NotFound if the config has none."""
        found = [d for d in self.datasets() if d.name == name]
        if not found:
            raise errors.NotFound(f"dataset '{name}' is not in the config of "
                                  f"stokerd at {self.address}")
        return found[0]

    def pipelines(self) -> List[PipelineInfo]:
        """The pipelines in the daemon's config: a list of PipelineInfo."""
        response = self._unary(self._stub.ListPipelines,
                               pb.ListPipelinesRequest())
        return [PipelineInfo(p.name, tuple(p.ops),
                             tuple(TensorSpec.from_proto(o) for o in p.outputs))
                for p in response.pipelines]

    def stream(self, dataset: str, pipeline: str, batch_size: int,
               seed: int = 0, epochs: int = 1, rank: int = 0,
               world_size: int = 1, job_id: str = "",
               drop_last: bool = False, transport: str = "auto",
               prefetch: int = 0, start: Tuple[int, int] = (0, 0),
               ra_reps: int = 1,
               reconnect_timeout: float = 30.0, hold: int = 1,
               share: bool = False, weight: float = 1.0,
               open_timeout: float = 30.0) -> Stream:
        """Opens a stream of batches; see stoker.Stream. The parameters
        but `transport`, `start` and `reconnect_timeout` are the fields of
        the stream's stoker.StreamRequest. Raises at once if
        the daemon refuses the request (NotFound, InvalidArgument, ...) or
        cannot be reached within `reconnect_timeout` seconds (Unavailable).
        `hold` (shm only) is how many batches you keep unreleased beyond
        the one being replaced; the ring has prefetch + hold slots.
        `share` joins a shared preprocessing run (jobs with the same
        dataset, pipeline, seed, batch size and world size get the same
        batches, built once). `weight` is the job's fair share of the
        daemon's workers when this stream starts the job. `open_timeout` is
        how long the daemon may hold the open waiting for memory budget or
        this rank's previous stream. `ra_reps` > 1 is repeated
        augmentation: each sample appears that many times per epoch, each
        copy augmented differently, spread over the ranks as torchvision's
        RASampler does (stoker.sampling); each batch's `sample_reps` says
        which copy each sample is.
        """
        request = StreamRequest.from_arguments(locals())
        return Stream(self, request, transport=transport, start=start,
                      reconnect_timeout=reconnect_timeout)

    def close(self) -> None:
        """Closes the channel; streams of this client end."""
        # grpcio's connectivity poller (started by channel_ready_future in
        # wait_ready) runs up to 0.2 s after the wait ends, and raises in its
        # thread ("Channel closed!") if the channel closes under it. Let it
        # stop first; the attribute is grpcio's, so absent is fine.
        # It checks every 0.2 s; waking much more often than that costs the
        # trainer CPU for nothing.
        state = getattr(self._channel, "_connectivity_state", None)
        deadline = time.monotonic() + 1.0
        while getattr(state, "polling", False) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"stoker.Client({self.address!r})"

    # Internal, for Stream.

    def wait_ready(self, deadline: float) -> None:
        """Waits until the channel is connected, or raises Unavailable at the
        monotonic `deadline`."""
        ready = grpc.channel_ready_future(self._channel)
        try:
            ready.result(timeout=max(0.0, deadline - time.monotonic()))
        except grpc.FutureTimeoutError:
            ready.cancel()
            raise errors.Unavailable("no connection") from None

    def check_socket(self) -> None:
        """Raises Unavailable naming the socket file of a ``unix:``
        address that does not exist, rather than waiting for it: no daemon
        listens there (or the path is wrong)."""
        path = socket_path(self.address)
        if path is not None and not os.path.exists(path):
            raise errors.Unavailable(
                f"no socket at {path}: no stokerd listens there (is it "
                f"running, and is {path} its listen.unix?)")

    def open_call(self, requests: Iterator[pb.StreamRequest]) -> Any:
        """Starts a Stream call that sends `requests` (an iterator)."""
        return self._stream_method(requests)

    def _unary(self, method: Any, request: Any) -> Any:
        self.check_socket()
        deadline = time.monotonic() + self.connect_timeout
        try:
            self.wait_ready(deadline)
        except errors.Unavailable as e:
            raise errors.Unavailable(
                f"cannot reach stokerd at {self.address} within "
                f"{self.connect_timeout:g} s: {e.message}") from None
        try:
            return method(request, timeout=max(
                1.0, deadline - time.monotonic()))
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None
