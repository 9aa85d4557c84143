"""The Python client over the shm transport against a real stokerd: same
bytes as the CLI and grpc, zero-copy views of the ring, slots held until
their batch is released."""
import gc
import json
import mmap
import os
import signal
import threading
import time

import numpy as np
import pytest
import xxhash

import stoker
from conftest import STOKER, run, wait_for


def cli_digest(daemon, *args):
    out = run([STOKER, "stream", "--address", daemon.address, "--json",
               "--quiet", *args])
    return json.loads(out.stdout.strip().splitlines()[-1])["content_digest"]


def digest(stream):
    # Each batch is hashed and dropped before the next: its slot goes back.
    h = xxhash.xxh3_64()
    for batch in stream:
        for array in batch.values():
            h.update(array)
    return h.hexdigest()


def test_same_bytes_as_the_cli_over_shm_and_as_grpc(client_daemon):
    client = stoker.Client(client_daemon.address)
    args = dict(batch_size=3, seed=2, epochs=2)
    with client.stream("train", "bytes", transport="shm", **args) as s:
        assert s.transport == "shm"
        shm = digest(s)
    with client.stream("train", "bytes", transport="grpc", **args) as s:
        grpc = digest(s)
    cli = cli_digest(client_daemon, "--transport", "shm", "--dataset",
                     "train", "--pipeline", "bytes", "--batch-size", 3,
                     "--seed", 2, "--epochs", 2)
    assert shm == grpc == cli


def test_arrays_are_read_only_views_of_the_shared_ring(client_daemon):
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "train", batch_size=4,
                       transport="shm") as s:
        batch = next(s)
        image, label = batch["image"], batch["label"]
        assert not image.flags.writeable and not label.flags.writeable
        # Both view one slot array, which views the mapping: no copy.
        assert image.base is label.base
        slot = image.base
        assert isinstance(slot, np.ndarray) and slot.dtype == np.uint8
        assert not slot.flags.owndata
        assert np.shares_memory(slot, image) and np.shares_memory(slot, label)
        owner = slot.base
        assert isinstance(owner, (mmap.mmap, memoryview))
        if isinstance(owner, memoryview):
            assert owner.readonly and isinstance(owner.obj, mmap.mmap)
        with pytest.raises(ValueError):
            image[0] = 0
        assert not batch.released
        batch.release()
        batch.release()  # Idempotent.
        assert batch.released


def test_held_batches_keep_their_bytes(client_daemon):
    # prefetch 2 + hold 2: four slots. Keeping the last two batches alive
    # while reading on, their slots must not be refilled.
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "bytes", batch_size=2, epochs=2, prefetch=2,
                       hold=2, transport="shm") as s:
        assert s.info.prefetch == 2
        kept = []  # (batch, bytes when received)
        seen = 0
        for batch in s:
            seen += 1
            kept.append((batch, {k: v.tobytes() for k, v in batch.items()}))
            for held, snapshot in kept:
                for name, array in held.items():
                    assert array.tobytes() == snapshot[name], (
                        held.position, name)
            if len(kept) > 2:
                kept.pop(0)
        assert seen == 30


def test_released_batches_give_their_slots_back(client_daemon):
    # Ten times more batches than slots (prefetch 1 + hold 1): only
    # releases keep the stream going.
    client = stoker.Client(client_daemon.address)
    start = time.monotonic()
    ids = []
    with client.stream("train", "bytes", batch_size=1, epochs=1, prefetch=1,
                       hold=1, transport="shm") as s:
        for batch in s:
            ids += batch.sample_ids
            with batch:  # Releases on exit; batch stays referenced.
                assert batch["image"].shape[0] == 1
            assert batch.released
    assert sorted(ids) == list(range(30))
    assert time.monotonic() - start < 15


def test_garbage_batches_release_their_slots_too(client_daemon):
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "bytes", batch_size=1, epochs=1, prefetch=1,
                       hold=1, transport="shm") as s:
        assert len([b.position for b in s]) == 30


def test_holding_every_slot_raises_instead_of_waiting_forever(client_daemon):
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "bytes", batch_size=1, epochs=1, prefetch=1,
                       hold=1, transport="shm") as s:
        kept = [next(s), next(s)]  # Both slots of the ring.
        with pytest.raises(stoker.ResourceExhausted):
            next(s)
        # Releasing one lets the stream go on, in order.
        kept.pop(0).release()
        assert next(s).position == (0, 2)
    del kept
    gc.collect()


def daemon_stream_stats(daemon):
    """The daemon's StreamStats of its one open stream (GetStats)."""
    import grpc
    from stoker._proto.stoker.v1 import stoker_pb2 as pb
    from stoker._proto.stoker.v1 import stoker_pb2_grpc as pb_grpc
    with grpc.insecure_channel(daemon.address) as channel:
        stats = pb_grpc.StokerStub(channel).GetStats(pb.GetStatsRequest(),
                                                      timeout=10)
    assert len(stats.streams) == 1
    return stats.streams[0]


def test_acks_go_in_pairs_and_the_daemon_counts_each(client_daemon):
    # Released one at a time, the acks of ten batches leave in five
    # messages; the daemon still takes ten acks with their stall figures.
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "bytes", batch_size=1, epochs=0, prefetch=2,
                       hold=1, transport="shm") as s:
        for _ in range(10):
            next(s).release()
        assert not s._releases.pending  # An even count: nothing kept back.
        deadline = time.monotonic() + 10
        while (daemon_stream_stats(client_daemon).acks < 10 and
               time.monotonic() < deadline):
            time.sleep(0.01)
        stats = daemon_stream_stats(client_daemon)
        assert stats.acks == 10
        assert stats.wait_seconds > 0 and stats.busy_seconds > 0
        next(s).release()
        assert len(s._releases.pending) == 1  # Kept back for its pair.


def test_a_copy_out_stream_has_prefetch_slots_and_acks_each_release(
        client_daemon):
    # A consumer that copies each batch out keeps no slot: the ring has
    # prefetch slots, none for hold, so no ack may wait for a pair.
    client = stoker.Client(client_daemon.address)
    request = stoker.StreamRequest("train", "bytes", batch_size=1, epochs=0,
                                   prefetch=2, hold=3)
    with stoker.Stream(client, request, transport="shm", copy_out=True) as s:
        assert s.ring_slots == 2
        for _ in range(5):
            next(s).release()
            assert not s._releases.pending  # Sent at release.
        assert wait_for(
            lambda: daemon_stream_stats(client_daemon).acks == 5, 10)
    with pytest.raises(ValueError, match="copy_out"):
        stoker.Stream(client, request, transport="shm", copy_out=True,
                      cuda_device=0)


def test_a_kept_back_ack_goes_out_when_the_ring_needs_its_slot(
        client_daemon):
    # Two slots (prefetch 1 + hold 1). With b held and a released, a's ack
    # is all that lets the daemon send c: next() must flush it, not wait.
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "bytes", batch_size=1, epochs=1, prefetch=1,
                       hold=1, transport="shm") as s:
        got = []
        reader = threading.Thread(target=lambda: got.extend(
            [a := next(s), next(s), a.release(), next(s)]))
        reader.start()
        reader.join(timeout=20)
        if reader.is_alive():
            s.close()  # Ends the waiting read.
            reader.join()
        assert [b.position for b in got[:2]] + [got[3].position] == [
            (0, 0), (0, 1), (0, 2)]


def test_auto_ends_on_shm_and_says_so(client_daemon):
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "train", batch_size=4) as s:
        assert s.transport == "shm" and s.info.transport == "shm"
        assert s.transport_attempts == [("shm", None)]
        assert len(list(b.position for b in s)) == 8


def test_loader_over_shm_gives_writable_copies_or_zero_copy_views(
        client_daemon):
    torch = pytest.importorskip("torch")
    from stoker.torch import Loader
    args = dict(dataset="train", pipeline="bytes", batch_size=4, seed=5,
                rank=0, world_size=1, job_id="", epochs=1, transport="shm")
    with Loader(client_daemon.address, **args) as ld:
        copies = list(ld)  # All kept: copies hold no slot.
        assert ld.transport == "shm"
        copies[0]["image"].add_(1)  # Writable.
    with Loader(client_daemon.address, zero_copy=True, **args) as ld:
        views = []
        for batch in ld:
            views.append((batch.position, batch["image"].clone()))
    assert [(b.position) for b in copies] == [p for p, _ in views]
    assert torch.equal(copies[1]["image"], views[1][1])


def test_a_daemon_without_ack_lists_gets_one_ack_per_message():
    # The header of an older daemon lacks ack_list: each release sends its
    # own Ack at once, as before AckList existed.
    from stoker._proto.stoker.v1 import stoker_pb2 as pb
    from stoker._releases import Releases

    class Sent:
        def __init__(self):
            self.requests = []

        def send(self, request):
            self.requests.append(request)

    acks = [pb.Ack(position=pb.Position(step=i)) for i in range(3)]
    old, new = Sent(), Sent()
    for call, ack_list in ((old, False), (new, True)):
        releases = Releases()
        releases.attach(call, ack_list=ack_list)
        for ack in acks:
            releases.release(releases.generation, ack)
        releases.flush()
    assert [r.WhichOneof("kind") for r in old.requests] == ["ack"] * 3
    assert [r.ack for r in old.requests] == acks
    assert [r.WhichOneof("kind") for r in new.requests] == ["acks"] * 2
    assert [list(r.acks.acks) for r in new.requests] == [acks[:2], acks[2:]]


def test_batches_and_acks_travel_on_the_notice_socket(client_daemon):
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "bytes", batch_size=3, epochs=1, prefetch=2,
                       hold=1, transport="shm") as s:
        assert s.notice_socket
        call = s._call._call  # The gRPC call under the socket.
        positions = [b.position for b in s]
    # The end came as the end of the socket, then status OK on the call.
    assert s.closed
    assert positions == [(0, i) for i in range(len(positions))]
    assert len(positions) == s.info.steps_per_epoch
    with pytest.raises(StopIteration):
        call.read()  # Nothing but the header ever came on the call.


def test_without_the_notice_socket_batches_come_on_the_call(
        client_daemon, monkeypatch):
    # A client that does not ask for the socket (as older ones) gets the
    # same batches as messages on the call.
    from stoker import transports
    client = stoker.Client(client_daemon.address)
    args = dict(dataset="train", pipeline="bytes", batch_size=5, seed=2,
                epochs=2, transport="shm")
    with client.stream(**args) as s:
        assert s.notice_socket
        on_socket = digest(s)
    prepare = transports.ShmTransport.prepare

    def without_socket(self, open_request):
        prepare(self, open_request)
        open_request.notice_socket = False

    monkeypatch.setattr(transports.ShmTransport, "prepare", without_socket)
    with client.stream(**args) as s:
        assert not s.notice_socket
        on_call = digest(s)
    assert on_socket == on_call


def test_close_wakes_a_read_waiting_on_the_notice_socket(client_daemon):
    # The daemon is stopped, so the read waits in recv() on the socket;
    # close() from another thread must end it.
    client = stoker.Client(client_daemon.address)
    s = client.stream("train", "bytes", batch_size=2, epochs=0, prefetch=2,
                      transport="shm")
    assert s.notice_socket
    read = []

    def consume():
        for batch in s:
            read.append(batch.position)
            batch.release()

    os.kill(client_daemon.proc.pid, signal.SIGSTOP)
    try:
        reader = threading.Thread(target=consume)
        reader.start()
        time.sleep(0.5)
        assert reader.is_alive(), "the read should be waiting"
        s.close()
        reader.join(timeout=5)
        assert not reader.is_alive(), "close() did not wake the read"
    finally:
        os.kill(client_daemon.proc.pid, signal.SIGCONT)
    assert s.closed


def test_a_close_landing_between_a_read_and_its_hand_over_ends_the_stream(
        client_daemon):
    """close() from another thread just after next() read a batch over shm
    (the ring is unmapped before the batch is handed over): next() ends the
    iteration, as after any close, and raises no DataLoss."""
    client = stoker.Client(client_daemon.address)
    s = client.stream("train", "bytes", batch_size=2, epochs=0, prefetch=2,
                      transport="shm")
    read = s._read

    def read_then_closed_elsewhere(call):
        response = read(call)
        s.close()  # What the other thread does, at the worst moment.
        return response

    s._read = read_then_closed_elsewhere
    with pytest.raises(StopIteration):
        next(s)
    assert s.closed


def test_closing_from_another_thread_during_next_is_never_data_loss(
        client_daemon):
    client = stoker.Client(client_daemon.address)
    for _ in range(30):
        s = client.stream("train", "bytes", batch_size=2, epochs=0,
                          prefetch=2, transport="shm")
        errors = []

        def consume():
            try:
                for batch in s:
                    batch.release()
            except stoker.StokerError as e:
                errors.append(e)

        reader = threading.Thread(target=consume)
        reader.start()
        s.close()
        reader.join(timeout=10)
        assert not reader.is_alive()
        assert errors == []


def test_a_stream_error_after_the_header_arrives_through_the_socket_end(
        client_daemon):
    # The daemon stops the stream (here: it is shut down gracefully) while
    # the consumer reads the socket: the read sees the socket end, then the
    # call's status, and the stream reconnects or raises, never hangs.
    client = stoker.Client(client_daemon.address)
    s = client.stream("train", "bytes", batch_size=2, epochs=0,
                      transport="shm", reconnect_timeout=0.5)
    assert s.notice_socket
    next(s).release()
    client_daemon.stop()
    with pytest.raises(stoker.Unavailable):
        for batch in s:
            batch.release()


def test_notice_call_framing_on_a_socketpair():
    # Frames split across reads and several in one read come out whole and
    # in order; the end of the socket hands over to the call's status; a
    # connection that ends inside a frame is DataLoss even if the call ends
    # OK; an oversized frame is DataLoss.
    import socket
    from stoker._call import NoticeCall
    from stoker._proto.stoker.v1 import stoker_pb2 as pb

    class EndedCall:
        def read(self):
            raise StopIteration

        def close(self):
            pass

    def frame(step):
        body = pb.StreamResponse(batch=pb.Batch(
            step=step, sample_ids=range(step))).SerializeToString()
        return len(body).to_bytes(4, "little") + body

    ours, daemon = socket.socketpair()
    call = NoticeCall(EndedCall(), ours, "test")
    data = b"".join(frame(i) for i in range(50))
    sender = threading.Thread(target=lambda: [
        daemon.sendall(data[i:i + 7]) for i in range(0, len(data), 7)])
    sender.start()
    assert [call.read().batch.step for _ in range(50)] == list(range(50))
    sender.join()
    daemon.close()
    with pytest.raises(StopIteration):
        call.read()

    ours, daemon = socket.socketpair()
    call = NoticeCall(EndedCall(), ours, "test")
    daemon.sendall(frame(3) + frame(4)[:-1])
    daemon.close()
    assert call.read().batch.step == 3
    with pytest.raises(stoker.DataLoss, match="inside a frame"):
        call.read()

    ours, daemon = socket.socketpair()
    call = NoticeCall(EndedCall(), ours, "test")
    daemon.sendall((2 << 20).to_bytes(4, "little"))
    with pytest.raises(stoker.DataLoss, match="at most"):
        call.read()
    daemon.close()
    call.close()
