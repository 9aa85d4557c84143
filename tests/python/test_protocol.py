"""The Stream protocol as proto/stoker/v1/stoker.proto states it, driven with
raw gRPC and the generated messages only, as a client written in another
language from the proto alone would."""
import queue

import grpc
import pytest

from stoker._proto.stoker.v1 import stoker_pb2 as pb

# What the proto tells a client to allow: a batch may exceed gRPC's default
# 4 MiB receive limit.
OPTIONS = [("grpc.max_receive_message_length", -1)]


class RawStream:
    """One Stream call: requests go in through a queue, responses come out
    of the call's iterator."""

    def __init__(self, channel, open_request):
        self.requests = queue.Queue()
        self.requests.put(pb.StreamRequest(open=open_request))
        call = channel.stream_stream(
            "/stoker.v1.Stoker/Stream",
            request_serializer=pb.StreamRequest.SerializeToString,
            response_deserializer=pb.StreamResponse.FromString)
        self.call = call(iter(self.requests.get, None), timeout=30)

    def next(self):
        return next(self.call)

    def ack(self, epoch, step):
        self.requests.put(pb.StreamRequest(ack=pb.Ack(
            position=pb.Position(epoch=epoch, step=step))))

    def close(self):
        self.requests.put(None)


def open_request(**kwargs):
    return pb.OpenStream(dataset="train", pipeline="train", batch_size=4,
                         seed=1, epochs=1, prefetch=2, **kwargs)


def test_an_ack_of_a_position_never_sent_is_invalid_argument(daemon):
    with grpc.insecure_channel(daemon.address, options=OPTIONS) as channel:
        stream = RawStream(channel, open_request())
        assert stream.next().WhichOneof("kind") == "header"
        first = stream.next().batch
        assert (first.epoch, first.step) == (0, 0)
        stream.ack(5, 0)  # Never sent: the client lost count.
        with pytest.raises(grpc.RpcError) as raised:
            while True:
                stream.next()
        stream.close()
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "(epoch 5, step 0)" in raised.value.details()


def test_a_repeated_ack_is_ignored_and_the_stream_ends_ok(daemon):
    with grpc.insecure_channel(daemon.address, options=OPTIONS) as channel:
        stream = RawStream(channel, open_request())
        header = stream.next().header
        steps = 0
        for response in stream.call:
            batch = response.batch
            stream.ack(batch.epoch, batch.step)
            stream.ack(batch.epoch, batch.step)  # Twice: harmless.
            steps += 1
        stream.close()
        assert stream.call.code() == grpc.StatusCode.OK
    assert steps == header.steps_per_epoch


@pytest.mark.parametrize("service", ["", "stoker.v1.Stoker"])
def test_the_health_service_answers_serving_for(daemon, service):
    with grpc.insecure_channel(daemon.address) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        # HealthCheckRequest{service} is field 1, a string;
        # HealthCheckResponse{status: SERVING} is field 1 = 1 on the wire.
        request = (b"\x0a" + bytes([len(service)]) + service.encode()
                   if service else b"")
        assert check(request, timeout=10) == b"\x08\x01"
