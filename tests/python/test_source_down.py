"""A stream whose dataset is served while staging, when its source goes
down for good: the daemon ends the stream UNAVAILABLE after its own
retries, each client reopens at its position within reconnect_timeout,
and gives up once reconnect_timeout has passed since the first failure
(a reopen that succeeds does not restart the window), with the daemon's
error: the dataset, the source URL and the HTTP status it met. An open on
a dataset whose staging failed that way is refused at once."""
import subprocess
import threading
import time

import stoker

from conftest import STOKER, wait_for
from test_staging import served, start  # noqa: F401

# The copy one small GET at a time, records fetched one by one (a block
# would bring a whole shard of this small pack at once), and a source
# request retried once: a GET that keeps failing fails in a few hundred ms.
STORAGE = ("storage: {parallel: 1, chunk_size: 64KiB, read_block: 0, "
           "retries: 1}\n")
RECONNECT = 2.0
# Beyond reconnect_timeout: the daemon's last attempt (a retried GET, the
# batch's records) and a loaded test machine.
MARGIN = 10.0


def served_while_staging(tmp_path, proxy):
    """A stokerd serving `train` from the proxy while it copies it over a
    link slow enough that the copy is far from done, once the dataset is
    servable (its record indexes are local)."""
    proxy.faults.link_rate = 20000  # Bytes/s for all answers together.
    d = start(tmp_path, {"train": f"{{path: {tmp_path / 'staged'}, "
                                  f"source: {proxy.url}/d/train}}"}, STORAGE)
    client = stoker.Client(d.address)
    assert wait_for(lambda: client.dataset("train").staging == "", 60)
    return d, client


def assert_names_the_source(message, proxy):
    assert "dataset 'train'" in message, message
    assert f"{proxy.url}/d/train/shard-" in message, message
    assert "HTTP 503" in message, message


def test_python_stream_gives_up_within_reconnect_timeout(tmp_path, served):
    proxy, _ = served
    d, client = served_while_staging(tmp_path, proxy)
    s = client.stream("train", "train", batch_size=1, seed=3, epochs=1,
                      reconnect_timeout=RECONNECT)
    outcome = {}

    def consume():
        try:
            for _ in s:
                pass
            outcome["ended"] = "without an error"
        except stoker.StokerError as e:
            outcome["error"] = e
        outcome["at"] = time.monotonic()

    try:
        next(s)  # The stream is under way...
        proxy.faults.fail_next = 10**9  # ...when its source goes down.
        down = time.monotonic()
        consumer = threading.Thread(target=consume)
        consumer.start()
        consumer.join(RECONNECT + MARGIN + 20)
        if consumer.is_alive():
            s.close()  # Interrupts the read; the thread ends.
            consumer.join(30)
        assert "at" in outcome and outcome["at"] - down < RECONNECT + MARGIN, (
            f"the stream did not end within {RECONNECT + MARGIN} s of its "
            f"source going down ({s.reconnects} reconnects)")
        e = outcome.get("error")
        assert isinstance(e, stoker.Unavailable), outcome
        assert_names_the_source(e.message, proxy)
        assert "reconnect_timeout 2 s" in e.message
        assert s.reconnects >= 1  # It did try again, at its position.
        assert s.closed
    finally:
        s.close()
        d.stop()


def test_cli_stream_gives_up_within_reconnect_timeout(tmp_path, served):
    """`stoker stream`, on the C++ client, with the same rule."""
    proxy, _ = served
    d, _ = served_while_staging(tmp_path, proxy)
    try:
        proxy.faults.fail_next = 10**9
        began = time.monotonic()
        r = subprocess.run(
            [str(a) for a in (
                STOKER, "stream", "--address", d.address, "--dataset",
                "train", "--pipeline", "train", "--batch-size", 4,
                "--epochs", 1, "--json", "--quiet", "--reconnect-timeout",
                RECONNECT)],
            capture_output=True, text=True, timeout=RECONNECT + MARGIN + 20)
        took = time.monotonic() - began
        assert r.returncode != 0
        assert took < RECONNECT + MARGIN, took
        assert "UNAVAILABLE" in r.stderr
        assert_names_the_source(r.stderr, proxy)
        assert "reconnect_timeout 2 s" in r.stderr
    finally:
        d.stop()


def test_an_open_on_a_staging_that_failed_is_not_retried(tmp_path, served):
    """A staging that failed stays failed until a reload, so the daemon
    refuses opens on it with FAILED_PRECONDITION, which no client retries:
    the Python client, which retries UNAVAILABLE at open too, no longer
    waits its reconnect_timeout for nothing."""
    proxy, _ = served
    proxy.faults.fail_next = 10**9
    d = start(tmp_path, {"train": f"{{path: {tmp_path / 'staged'}, "
                                  f"source: {proxy.url}/d/train}}"}, STORAGE)
    try:
        client = stoker.Client(d.address)
        assert wait_for(lambda: client.dataset("train").staging.startswith(
            "failed"), 30), client.dataset("train").staging
        began = time.monotonic()
        try:
            client.stream("train", "train", batch_size=4, reconnect_timeout=30)
            assert False, "the open succeeded"
        except stoker.StokerError as e:
            error = e
        assert time.monotonic() - began < 5
        assert isinstance(error, stoker.FailedPrecondition), error
        assert f"{proxy.url}/d/train/manifest.json: HTTP 503" in error.message
        assert "reload" in error.message
    finally:
        d.stop()
