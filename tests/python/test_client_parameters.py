"""A stream's parameters are defined once (stoker.StreamRequest) and reach the
daemon from every entry point: Client.stream and stoker.torch.Loader take
each of them, with the same defaults, and the Loader forwards each one to its
stream. This is how the Loader once dropped `share` and `weight`."""
import dataclasses
import inspect

from stoker import Client, StreamRequest
from stoker.transports import ShmTransport
from stoker.torch import Loader

# Client.stream's parameters that are the stream's own, not the request's.
STREAM_ONLY = {"transport", "start", "reconnect_timeout"}
# Loader defaults that differ from Client.stream's, by design: no bound on
# epochs, the rest from the distributed context, and dataset, pipeline and
# batch_size keywords after an optional address (the one-line form; the
# Loader refuses a call without them).
LOADER_DEFAULTS = {"epochs": None, "rank": None, "world_size": None,
                   "job_id": None, "dataset": None, "pipeline": None,
                   "batch_size": None}

# A value other than the default for every parameter of Client.stream, that
# a daemon with the `bytes` pipeline accepts.
NOT_DEFAULT = dict(
    dataset="train", pipeline="bytes", batch_size=3, seed=7, epochs=2,
    rank=1, world_size=2, job_id="forwarded", drop_last=True, ra_reps=2,
    prefetch=3,
    hold=2, share=True, weight=2.5, open_timeout=9.0, transport="grpc",
    start=(0, 1), reconnect_timeout=12.0)


def parameters(function):
    return {name: p.default for name, p in
            inspect.signature(function).parameters.items() if name != "self"}


def request_fields():
    """{field: default} of StreamRequest, as its __init__ shows them."""
    fields = parameters(StreamRequest)
    assert list(fields) == [f.name for f in dataclasses.fields(StreamRequest)]
    return fields


def test_client_stream_takes_each_request_field_with_its_default():
    params = parameters(Client.stream)
    fields = request_fields()
    assert set(params) == set(fields) | STREAM_ONLY
    assert {k: params[k] for k in fields} == fields


def test_loader_takes_every_parameter_of_client_stream():
    stream = parameters(Client.stream)
    loader = parameters(Loader)
    assert set(stream) <= set(loader)
    assert {k: loader[k] for k in stream} == dict(stream, **LOADER_DEFAULTS)


def test_every_request_field_reaches_the_open_message():
    fields = request_fields()
    values = {k: NOT_DEFAULT[k] for k in fields}
    assert all(values[k] != fields[k] for k in fields)
    assert "hold" in fields  # Sent over shm only, so the open is over shm.
    sent = StreamRequest(**values).to_proto((4, 5), ShmTransport()).open
    assert {k: getattr(sent, k) for k in fields} == values
    assert (sent.start.epoch, sent.start.step) == (4, 5)


def test_the_loader_forwards_every_stream_parameter(client_daemon):
    assert set(NOT_DEFAULT) == set(parameters(Client.stream))
    # Rank 0 of the same job opens first, so the job's plan is the same.
    with Client(client_daemon.address).stream(
            **dict(NOT_DEFAULT, rank=0, start=(0, 0))):
        ld = Loader(client_daemon.address, **NOT_DEFAULT)
        batch = next(iter(ld))
        stream = ld.stream
        fields = request_fields()
        assert stream.request == StreamRequest(
            **{k: NOT_DEFAULT[k] for k in fields})
        assert stream.transport == NOT_DEFAULT["transport"]
        assert stream.reconnect_timeout == NOT_DEFAULT["reconnect_timeout"]
        assert batch.position == NOT_DEFAULT["start"]
        ld.close()


def test_a_loader_asked_to_share_joins_a_shared_run(client_daemon):
    args = dict(dataset="train", pipeline="bytes", batch_size=4, seed=9,
                epochs=1, rank=0, world_size=1, share=True, weight=2.0)
    first = Loader(client_daemon.address, job_id="a", **args)
    second = Loader(client_daemon.address, job_id="b", **args)
    a, b = next(iter(first)), next(iter(second))
    assert first.stream.info.shared and second.stream.info.shared
    assert a.sample_ids == b.sample_ids
    first.close()
    second.close()
