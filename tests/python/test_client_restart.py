"""The Python client when stokerd is down, dies, or restarts."""
import signal
import threading
import time

import pytest

import stoker
from stoker.torch import Loader


def positions_and_bytes(batches):
    """Batches of a Stream (numpy) or a Loader (torch) as comparable tuples."""
    def raw(a):
        return a.numpy().tobytes() if hasattr(a, "numpy") else a.tobytes()
    return [(b.epoch, b.step, tuple(b.sample_ids),
             b"".join(raw(a) for a in b.values())) for b in batches]


def test_no_daemon_raises_unavailable_after_the_timeout(tmp_path):
    address = f"unix:{tmp_path / 'nobody.sock'}"
    (tmp_path / "stale.sock").touch()  # A socket file nobody listens on.
    stale = f"unix:{tmp_path / 'stale.sock'}"
    client = stoker.Client(stale, connect_timeout=0.5)
    began = time.monotonic()
    with pytest.raises(stoker.Unavailable) as e:
        client.stream("train", "train", batch_size=4, start=(2, 3),
                      reconnect_timeout=1.0)
    took = time.monotonic() - began
    assert 0.9 <= took < 5, took
    assert stale in e.value.message
    assert "epoch 2 step 3" in e.value.message
    assert isinstance(e.value, stoker.StokerError)
    with pytest.raises(stoker.Unavailable) as e:
        client.datasets()
    assert stale in e.value.message
    # No socket file at all: at once, naming it (tests/python/test_addresses.py).
    client = stoker.Client(address, connect_timeout=0.5)
    began = time.monotonic()
    with pytest.raises(stoker.Unavailable) as e:
        client.stream("train", "train", batch_size=4, reconnect_timeout=1.0)
    assert time.monotonic() - began < 0.9
    assert f"no socket at {tmp_path / 'nobody.sock'}" in e.value.message
    ld = Loader(address, "train", "train", batch_size=4, rank=0,
                world_size=1, reconnect_timeout=0.5)
    with pytest.raises(stoker.Unavailable):
        next(iter(ld))


def restart_later(daemon, delay):
    thread = threading.Thread(target=lambda: (time.sleep(delay),
                                              daemon.start()))
    thread.start()
    return thread


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_stream_resumes_exactly_after_the_daemon_restarts(client_daemon, sig):
    request = dict(dataset="train", pipeline="bytes", batch_size=3, seed=4,
                   epochs=3)
    client = stoker.Client(client_daemon.address)
    with client.stream(**request) as s:
        whole = positions_and_bytes(s)
    assert len(whole) == 30

    got, restart = [], None
    with client.stream(**request, reconnect_timeout=20) as s:
        for batch in s:
            # Kept as bytes: over shm (auto) a kept batch holds its slot.
            got += positions_and_bytes([batch])
            if len(got) == 7:
                client_daemon.signal(sig)
                client_daemon.wait()
                restart = restart_later(client_daemon, 0.5)
        assert s.reconnects >= 1
    restart.join()
    assert got == whole


def test_unavailable_names_address_and_position_when_it_stays_down(
        client_daemon):
    client = stoker.Client(client_daemon.address)
    s = client.stream("train", "bytes", batch_size=3, epochs=2, prefetch=1,
                      reconnect_timeout=1.0)
    for _ in range(4):
        next(s)
    client_daemon.proc.kill()
    client_daemon.wait()
    began = time.monotonic()
    with pytest.raises(stoker.Unavailable) as e:
        for _ in s:
            pass
    assert time.monotonic() - began < 5
    epoch, step = s.position
    assert (epoch, step) >= (0, 4)
    assert client_daemon.address in e.value.message
    assert f"at epoch {epoch} step {step}" in e.value.message
    assert "did not come back within 1 s" in e.value.message
    assert s.closed


def test_loader_state_resumes_on_a_restarted_daemon(client_daemon):
    kwargs = dict(batch_size=4, seed=2, rank=0, world_size=1, job_id="",
                  epochs=2)
    uninterrupted = Loader(client_daemon.address, "train", "half", **kwargs)
    whole = positions_and_bytes(b for _ in range(2) for b in uninterrupted)
    uninterrupted.close()
    assert len(whole) == 16
    first = Loader(client_daemon.address, "train", "half", **kwargs)
    head = [b for _, b in zip(range(6), first)]
    state = first.state_dict()
    first.close()

    client_daemon.stop()
    client_daemon.start()
    second = Loader(client_daemon.address, "train", "half", **kwargs)
    second.load_state_dict(state)
    tail = [b for _ in range(2) for b in second]
    assert positions_and_bytes(head + tail) == whole


def test_a_cancel_the_client_did_not_ask_for_is_retried_as_unavailable():
    """A stopping daemon cancels calls still open after its grace period,
    and new ones that reach it on a closing connection: the C++ client took
    that CANCELLED for its own and gave up (28 of 38 SIGTERM restarts)."""
    import grpc
    from stoker import errors

    class Cancelled(grpc.RpcError):
        def code(self):
            return grpc.StatusCode.CANCELLED

        def details(self):
            return "CANCELLED"

    e = errors.from_stream_error(Cancelled())
    assert isinstance(e, stoker.Unavailable), e
    assert "cancelled the call" in e.message
    assert isinstance(errors.from_rpc_error(Cancelled()), stoker.Cancelled)


def test_restarts_further_apart_than_the_window_are_ridden_out(client_daemon):
    """The reconnect window runs from the first failure and only a batch
    delivered restarts it: five restarts, each far shorter than
    reconnect_timeout, spread over more than it with batches between them,
    leave a stream that goes on."""
    window = 1.5
    client = stoker.Client(client_daemon.address)
    outages, starts = [], []
    with client.stream("train", "bytes", batch_size=3, epochs=0,
                       reconnect_timeout=window) as s:
        for _ in range(5):
            # Batches for 0.6 s, then the daemon restarts.
            until = time.monotonic() + 0.6
            while time.monotonic() < until:
                next(s)
            starts.append(time.monotonic())
            client_daemon.proc.kill()
            client_daemon.wait()
            client_daemon.start()
            reconnects = s.reconnects
            while s.reconnects == reconnects:  # Batches it had already.
                next(s)
            outages.append(time.monotonic() - starts[-1])
        assert s.reconnects == 5
    assert max(outages) < window < starts[-1] - starts[0], outages
