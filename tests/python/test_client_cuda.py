"""The Python client's CUDA parts without a GPU: cuda_ipc's refusals and
auto's fallback (with the reason kept), and acks that wait for a fence. The
driver bindings are tested in test_client_cuda_driver.py; what needs a GPU
is in tests/gpu/test_cuda_python.py.
"""
import logging

import numpy as np
import pytest

import stoker
from stoker import _cuda, transports
from stoker._proto.stoker.v1 import stoker_pb2 as pb
from stoker.batch import pair_ragged
from stoker.request import StreamRequest
from stoker._releases import Releases
from stoker.stream import Stream

torch = pytest.importorskip("torch")


def without_cuda_torch(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)


def without_gpu(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def with_gpu_but_driver(monkeypatch, library):
    """torch says it has a GPU; loading libcuda.so.1 gives `library` (or
    raises it, an OSError)."""
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(_cuda, "_driver", None)

    def load(name):
        assert name == "libcuda.so.1"
        if isinstance(library, OSError):
            raise library
        return library

    monkeypatch.setattr(_cuda.ctypes, "CDLL", load)


class FakeLibrary:
    """libcuda.so.1 whose cuInit fails with CUDA_ERROR_NO_DEVICE (100)."""

    def __init__(self):
        for name in _cuda.SIGNATURES:
            setattr(self, name, self._returns(0))
        self.cuInit = self._returns(100)
        self.cuGetErrorName = self._names(b"CUDA_ERROR_NO_DEVICE")
        self.cuGetErrorString = self._names(b"no CUDA-capable device is "
                                            b"detected")

    @staticmethod
    def _returns(result):
        def call(*args):
            return result
        return call

    @staticmethod
    def _names(text):
        def call(result, out):
            out._obj.value = text
            return 0
        return call


@pytest.mark.parametrize("setup,why", [
    (without_cuda_torch, "torch with CUDA is not installed"),
    (without_gpu, "no GPU visible"),
    (lambda mp: with_gpu_but_driver(mp, OSError("libcuda.so.1: cannot open "
                                                "shared object file")),
     "cannot load the CUDA driver libcuda.so.1: libcuda.so.1: cannot open"),
    (lambda mp: with_gpu_but_driver(mp, FakeLibrary()),
     "cuInit failed with CUDA_ERROR_NO_DEVICE (no CUDA-capable device is "
     "detected)"),
])
def test_cuda_ipc_by_name_is_refused_before_sending_saying_why(
        monkeypatch, setup, why):
    setup(monkeypatch)
    # No daemon listens here: nothing is sent.
    client = stoker.Client("unix:/nonexistent/stoker.sock")
    with pytest.raises(stoker.FailedPrecondition) as e:
        client.stream("train", "train", batch_size=4, transport="cuda_ipc")
    assert e.value.message.startswith(
        "transport 'cuda_ipc' cannot be used here: " + why), e.value.message
    assert "'shm'" in e.value.message and "'grpc'" in e.value.message


def test_a_loader_asked_for_cuda_ipc_needs_a_cuda_device():
    from stoker.torch import Loader
    with pytest.raises(ValueError, match="pass device='cuda'"):
        Loader("unix:/nonexistent/stoker.sock", "train", "train",
               batch_size=4, transport="cuda_ipc")


def test_auto_tries_cuda_ipc_only_for_a_gpu_consumer_on_this_node():
    unix, tcp = "unix:/run/stoker.sock", "localhost:7070"
    assert transports.candidates("auto", unix, 0) == ["cuda_ipc", "shm",
                                                      "grpc"]
    assert transports.candidates("auto", unix) == ["shm", "grpc"]
    assert transports.candidates("auto", tcp, 0) == ["grpc"]


def test_auto_skips_cuda_ipc_with_the_reason_and_falls_back_to_shm(
        client_daemon, monkeypatch, caplog):
    without_cuda_torch(monkeypatch)
    monkeypatch.setattr(transports, "_said", [])  # Said once per process.
    client = stoker.Client(client_daemon.address)
    request = StreamRequest("train", "bytes", batch_size=4)
    with caplog.at_level(logging.WARNING, logger="stoker"), \
            Stream(client, request, cuda_device=0) as s:
        assert s.transport == "shm" and not s.on_device
        (first, why), second = s.transport_attempts
        assert first == "cuda_ipc"
        assert why.startswith("FAILED_PRECONDITION: transport 'cuda_ipc' "
                              "cannot be used here: torch with CUDA is not "
                              "installed"), why
        assert second == ("shm", None)
        # The ring cannot be page-locked either: said once, copies stay
        # synchronous, and releases wait for no fence.
        assert not s.pinned
        assert sum(len(b.sample_ids) for b in s) == 30
    said = [r.getMessage() for r in caplog.records
            if "not page-locked" in r.getMessage()]
    assert len(said) == 1 and "cuda:0" in said[0], said


def test_a_gpu_loader_says_which_transport_auto_chose_and_why(
        client_daemon, monkeypatch, caplog):
    from stoker import _tensors
    from stoker.torch import Loader
    # torch thinks it has a GPU but is built without CUDA: cuda_ipc is
    # refused on the client, shm is granted but not page-locked, and the
    # copy to the "GPU" is this CPU's (torch cannot pin memory here).
    without_cuda_torch(monkeypatch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(_tensors, "staged_to_device", lambda t, d: t.clone())
    with caplog.at_level(logging.INFO, logger="stoker"):
        ld = Loader(client_daemon.address, "train", "bytes", batch_size=4,
                    device="cuda:0", epochs=1)
        batches = list(ld)
    assert len(batches) == 8
    assert ld.transport == "shm" and not ld.pinned
    assert ld.transport_reason.startswith(
        "transport 'auto' for device cuda:0 tried cuda_ipc, shm: ")
    ld.close()
    assert ld.transport is None and ld.transport_reason is None
    said = [r.getMessage() for r in caplog.records
            if "stoker.torch.Loader" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith(
        "stoker.torch.Loader: transport shm (transport 'auto' for device "
        "cuda:0 tried cuda_ipc, shm: cuda_ipc refused (FAILED_PRECONDITION: "
        "transport 'cuda_ipc' cannot be used here: torch with CUDA is not "
        "installed"), said
    assert said[0].endswith("; shm granted)"), said


# Acks that wait for a fence.

class Sent:
    def __init__(self):
        self.acks = []

    def send(self, request):
        if request.WhichOneof("kind") == "ack":
            self.acks.append(request.ack.position.step)
        else:
            self.acks += [a.position.step for a in request.acks.acks]


class FakeEvent:
    """A fence that completes when the test says, or when waited for."""

    def __init__(self):
        self.done = False
        self.waited = False

    def query(self):
        return self.done

    def synchronize(self):
        self.waited = self.done = True


def ack(step):
    return pb.Ack(position=pb.Position(step=step))


def test_a_fenced_release_is_acked_once_its_event_completes():
    call, releases = Sent(), Releases()
    releases.attach(call)
    events = [FakeEvent() for _ in range(3)]
    for step, event in enumerate(events):
        releases.release(releases.generation, ack(step), lambda e=event: e)
    releases.settle()
    assert call.acks == [] and len(releases.fenced) == 3
    events[1].done = True  # Out of order: acks stay in release order.
    releases.settle()
    assert call.acks == []
    events[0].done = True
    releases.settle()
    assert call.acks == [0, 1] and not any(e.waited for e in events)
    releases.settle(wait=1)  # Waits for the oldest only.
    assert call.acks == [0, 1, 2] and events[2].waited
    # A release without a fence (its transport's is None) is acked at once.
    releases.release(releases.generation, ack(3), lambda: None)
    assert call.acks == [0, 1, 2, 3]


def test_fenced_acks_of_an_earlier_call_are_dropped():
    old, new, releases = Sent(), Sent(), Releases()
    releases.attach(old)
    event = FakeEvent()
    releases.release(releases.generation, ack(0), lambda: event)
    releases.attach(new)
    event.done = True
    releases.settle()
    assert old.acks == [] and new.acks == []


def test_a_stream_waits_for_fences_only_when_they_hold_the_last_slot():
    # Stream._send_acks with 3 slots and hold 1: fenced acks go out as their
    # events complete, and the oldest is waited for when held + fenced
    # batches take every slot.
    stream = Stream.__new__(Stream)
    stream._request = StreamRequest("d", "p", batch_size=1, hold=1)
    stream._copy_out = False
    stream._releases = releases = Releases()
    call = Sent()
    releases.attach(call)
    stream._held = []
    events = [FakeEvent() for _ in range(3)]
    for step in range(2):
        releases.release(releases.generation, ack(step),
                         lambda e=events[step]: e)
    stream._send_acks(3)
    assert call.acks == [] and not events[0].waited
    releases.release(releases.generation, ack(2), lambda: events[2])
    stream._send_acks(3)
    assert call.acks == [0] and events[0].waited and not events[1].waited


def test_offsets_on_a_gpu_are_not_read_to_pair_a_ragged_field():
    class Unreadable:
        shape = (5,)

        def __getitem__(self, key):
            raise AssertionError("read")

    specs = [pb.TensorSpec(name="t", dtype=pb.DTYPE_INT64, shape=[-1]),
             pb.TensorSpec(name="t.offsets", dtype=pb.DTYPE_INT64, shape=[3],
                           offsets_for="t")]
    values, offsets = Unreadable(), Unreadable()
    paired = pair_ragged({"t": values, "t.offsets": offsets}, specs,
                         read_offsets=False)
    assert paired["t"].values is values and paired["t"].offsets is offsets
    with pytest.raises(stoker.DataLoss):
        pair_ragged({"t": values, "t.offsets": offsets},
                    [specs[0], pb.TensorSpec(name="t.offsets", shape=[3],
                                             dtype=pb.DTYPE_INT32,
                                             offsets_for="t")],
                    read_offsets=False)


def test_a_batch_naming_a_slot_past_the_device_ring_is_data_loss():
    from stoker._wire import Response
    t = object.__new__(transports.CudaIpcTransport)  # No GPU to map on.
    t._ring = None
    for batch, where in (
            (pb.Batch(epoch=1, step=2, slot=3),
             "names slot 3 of the cuda_ipc ring, which has 0 slots"),
            (pb.Batch(epoch=1, step=2, slot=0, in_shared_ring=True),
             "names slot 0 of a shared ring, which cuda_ipc does not have")):
        with pytest.raises(stoker.DataLoss,
                           match=f"batch of epoch 1 step 2 {where}$"):
            t.arrays(Response(batch=batch))


class LateEvent(FakeEvent):
    """Completes at its third query, as kernels still running would."""

    def __init__(self):
        super().__init__()
        self.queries = 0

    def query(self):
        self.queries += 1
        self.done = self.done or self.queries >= 3
        return self.done


class DeviceLikeShm(transports.ShmTransport):
    """shm that hands out torch tensors, as cuda_ipc does, and whose
    releases wait for events that complete late."""

    on_device = True

    def __init__(self, cuda_device=None):
        super().__init__(None)
        self.events = []

    def arrays(self, response):
        views, owner = super().arrays(response)
        return {name: torch.from_numpy(np.array(a))
                for name, a in views.items()}, owner

    def fence(self):
        self.events.append(LateEvent())
        return self.events[-1]


def test_a_loader_on_device_yields_the_tensors_and_acks_after_their_events(
        client_daemon, monkeypatch):
    from stoker.torch import Loader
    made = []

    class Recorded(DeviceLikeShm):
        def __init__(self, cuda_device=None):
            super().__init__(cuda_device)
            made.append(self)

    monkeypatch.setitem(transports.TRANSPORTS, "shm", Recorded)
    # Its tensors are on the CPU: the Loader may take it without a GPU.
    monkeypatch.setattr("stoker.torch.on_device", lambda name: False)
    # The Loader releases batch k as the k-th fence: its ack must not go
    # out before that event has completed.
    from stoker._call import NoticeCall
    send = NoticeCall.send
    early = []

    def checked(self, request):
        acks = ([request.ack] if request.WhichOneof("kind") == "ack"
                else list(request.acks.acks))
        early.extend(a.position.step for a in acks
                     if not made[-1].events[a.position.step].done)
        send(self, request)

    monkeypatch.setattr(NoticeCall, "send", checked)
    # Two slots for thirty batches: only acks that follow the events keep
    # the stream going.
    args = dict(dataset="train", pipeline="bytes", batch_size=1, seed=4,
                epochs=1, prefetch=1, hold=1)
    ld = Loader(client_daemon.address, transport="shm", **args)
    got = [(b.sample_ids, {k: t.clone() for k, t in b.items()}) for b in ld]
    ld.close()
    events = made[0].events
    assert len(events) == 30 and all(e.done for e in events)
    assert any(e.waited for e in events), "the ring never filled up"
    assert early == []
    with stoker.Client(client_daemon.address).stream(
            transport="grpc", **args) as s:
        want = [(b.sample_ids, {k: torch.from_numpy(np.array(a))
                                for k, a in b.items()}) for b in s]
    assert [ids for ids, _ in got] == [ids for ids, _ in want]
    for (_, tensors), (_, arrays) in zip(got, want):
        assert tensors.keys() == arrays.keys()
        assert all(torch.equal(tensors[k], arrays[k]) for k in tensors)
