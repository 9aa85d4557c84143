"""The Python client's transport tables: each derived from the one list of
Transport classes, they agree with each other and with the wire's
Transport enum, and the notice socket's frame bound is the protocol's."""
from stoker import _call, transports
from stoker._proto.stoker.v1 import stoker_pb2 as pb


def test_every_wire_transport_has_one_class_named_as_the_enum():
    wire = {value: name[len("TRANSPORT_"):].lower()
            for name, value in pb.Transport.items()
            if value != pb.TRANSPORT_UNSPECIFIED}
    assert {t.wire: t.name for t in transports.TRANSPORTS.values()} == wire
    assert transports.NAMES == {pb.TRANSPORT_UNSPECIFIED: "grpc", **wire}


def test_auto_tries_every_transport_once_gpu_first():
    assert transports.AUTO_PREFERENCE == ("cuda_ipc", "shm", "grpc")
    assert set(transports.AUTO_PREFERENCE) == set(transports.TRANSPORTS)
    assert transports.CHOICES == ("auto", "grpc", "shm", "cuda_ipc")


def test_what_a_transport_name_says_of_its_batches():
    assert [transports.on_device(n) for n in transports.CHOICES] == \
        [False, False, False, True]
    assert [transports.holds_slots(n) for n in transports.CHOICES] == \
        [False, False, True, False]


def test_the_notice_frame_bound_is_the_protocols():
    assert _call.NoticeCall.MAX_FRAME == pb.NOTICE_FRAME_MAX_BYTES == 1 << 20
