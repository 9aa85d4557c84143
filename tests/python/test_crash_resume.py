"""Crash-safe resume: `kill -9` (or SIGTERM) of stokerd in the middle of an epoch, a new
stokerd on the same socket, and the client carries on from its last
acknowledged batch. Across the crash every sample of every epoch is
delivered exactly once, and the bytes are those of an uninterrupted run.

The daemon is a real process killed with SIGKILL: it leaves its socket
file behind and frees nothing on its own; the restarted daemon must clear
the stale socket, and the client must reconnect and reopen at its position.
"""
import json
import signal
import subprocess
import time
from collections import Counter

import pytest

import stoker
from conftest import STOKER, run

NUM_SAMPLES = 30  # The session dataset of conftest.py.
REQUEST = dict(dataset="train", pipeline="bytes", batch_size=4, seed=11,
               epochs=2)
STEPS = 2 * -(-NUM_SAMPLES // 4)  # Batches in the two epochs: 16.


def stream_args(daemon, transport, ids_path):
    return [STOKER, "stream", "--address", daemon.address, "--dataset",
            REQUEST["dataset"], "--pipeline", REQUEST["pipeline"],
            "--batch-size", REQUEST["batch_size"], "--seed", REQUEST["seed"],
            "--epochs", REQUEST["epochs"], "--transport", transport,
            "--indices-out", ids_path, "--json", "--quiet"]


def read_ids(path):
    return [int(line) for line in path.read_text().split()]


def assert_each_epoch_exactly_once(ids):
    assert len(ids) == REQUEST["epochs"] * NUM_SAMPLES, len(ids)
    for e in range(REQUEST["epochs"]):
        epoch = ids[e * NUM_SAMPLES:(e + 1) * NUM_SAMPLES]
        missing = set(range(NUM_SAMPLES)) - set(epoch)
        repeated = [i for i, n in Counter(epoch).items() if n > 1]
        assert not missing and not repeated, (
            f"epoch {e}: missing {sorted(missing)}, repeated {repeated}")


def wait_for_lines(path, count, proc, timeout=30):
    """Waits until the CLI has written `count` ids (it flushes per batch)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().split()) >= count:
            return
        assert proc.poll() is None, "the client ended before the crash"
        time.sleep(0.01)
    raise AssertionError(f"the client did not reach {count} samples")


def kill_and_restart(daemon, sig=signal.SIGKILL):
    pid = daemon.proc.pid
    daemon.signal(sig)
    if sig == signal.SIGKILL:
        assert daemon.wait() == -signal.SIGKILL
        # kill -9 leaves the socket file; the new daemon must take it over.
        assert daemon.socket.exists(), "a killed daemon cannot remove its socket"
    else:
        # A stopping daemon ends its streams with UNAVAILABLE, and cancels
        # the calls that reach it while it shuts down: the C++ client took
        # that CANCELLED for its own and gave up (28 of 38 trials).
        assert daemon.wait() == 0
    daemon.start()
    assert daemon.proc.pid != pid


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM],
                         ids=["kill-9", "sigterm"])
@pytest.mark.parametrize("transport", ["grpc", "shm"])
def test_cli_resumes_exactly_after_a_restart(client_daemon, tmp_path,
                                             transport, sig):
    """The C++ client library (through `stoker stream`) over a daemon killed
    or stopped three times: in epoch 0 and twice in epoch 1."""
    ref = json.loads(run(stream_args(client_daemon, transport,
                                     tmp_path / "ref.txt")).stdout)
    assert ref["status"] == "OK" and ref["reconnects"] == 0
    reference_ids = read_ids(tmp_path / "ref.txt")
    assert_each_epoch_exactly_once(reference_ids)

    ids_path = tmp_path / "crash.txt"
    # --step-ms: a trainer that takes a while per step, so the kills land in
    # the middle of the stream; the prefetch window is full at each.
    proc = subprocess.Popen(
        [str(a) for a in stream_args(client_daemon, transport, ids_path)] +
        ["--step-ms", "60", "--prefetch", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        # Steps 2, 7 and 12: more than the prefetch depth apart, so that each
        # one lands on a stream that the client has reopened.
        for samples in (2 * 4, 7 * 4, NUM_SAMPLES + 4 * 4):
            wait_for_lines(ids_path, samples, proc)
            kill_and_restart(client_daemon, sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    result = json.loads(out)
    assert result["status"] == "OK", result
    assert result["reconnects"] >= 3, result
    assert result["transport"] == transport
    assert result["samples"] == REQUEST["epochs"] * NUM_SAMPLES
    assert result["batches"] == STEPS
    assert result["next_position"] == {"epoch": 2, "step": 0}
    ids = read_ids(ids_path)
    assert_each_epoch_exactly_once(ids)
    assert ids == reference_ids
    assert result["content_digest"] == ref["content_digest"]


def batch_record(batch):
    return (batch.epoch, batch.step, tuple(batch.sample_ids),
            b"".join(a.tobytes() for a in batch.values()))


@pytest.mark.parametrize("transport", ["grpc", "shm"])
def test_python_client_resumes_exactly_after_kill_9(client_daemon,
                                                    transport):
    client = stoker.Client(client_daemon.address)
    with client.stream(**REQUEST, transport=transport) as s:
        whole = [batch_record(b) for b in s]
    assert len(whole) == STEPS

    got = []
    with client.stream(**REQUEST, transport=transport, prefetch=4,
                       reconnect_timeout=30) as s:
        for batch in s:
            got.append(batch_record(batch))
            batch = None  # Over shm a kept batch would hold its slot.
            if len(got) in (2, 9):  # In epoch 0, then in epoch 1.
                kill_and_restart(client_daemon)
        assert s.reconnects >= 2
        assert s.transport == transport
    assert [g[:3] for g in got] == [w[:3] for w in whole]
    assert got == whole
    ids = [i for g in got for i in g[2]]
    assert_each_epoch_exactly_once(ids)


def test_cli_rides_out_restarts_spread_over_more_than_the_window(
        client_daemon, tmp_path):
    """The C++ client's reconnect window runs from the first failure and
    only a batch delivered restarts it: five restarts spread over more than
    --reconnect-timeout (batches between them), each far shorter."""
    window = 1.5
    ids_path = tmp_path / "ids.txt"
    args = stream_args(client_daemon, "grpc", ids_path)
    args[args.index("--epochs") + 1] = 0  # Endless.
    proc = subprocess.Popen(
        [str(a) for a in args + ["--step-ms", 20, "--reconnect-timeout",
                                 window]],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        starts, samples = [], 0
        for _ in range(5):
            # 32 more batches of 20 ms each: 0.64 s at least.
            samples += 32 * REQUEST["batch_size"]
            wait_for_lines(ids_path, samples, proc)
            starts.append(time.monotonic())
            kill_and_restart(client_daemon)
        samples += 4 * REQUEST["batch_size"]
        wait_for_lines(ids_path, samples, proc)  # Still going.
        assert proc.poll() is None
        assert starts[-1] - starts[0] > window
    finally:
        proc.kill()
        out, err = proc.communicate()
    assert "reconnect_timeout" not in err, err
