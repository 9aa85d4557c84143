"""Helper daemons (docs/remote-design.md): a node stokerd has other stokerds
build chunks of its streams' batches, and the trainer sees the same bytes,
each sample once, whether a helper builds them, fails, or is not used.

Every daemon listens on a unix socket in the test's temp dir; a helper also
on TCP at 127.0.0.1 (port 0 the first time; a restarted helper takes the
port back). Each process is stopped by PID when the test ends.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, STOKER, TRAIN_PIPELINE, Daemon, make_images, run


def daemon_config(folder, dataset, tcp=None, helpers=None, workers=1,
                  pipelines=""):
    folder.mkdir(parents=True, exist_ok=True)
    socket = folder / "stoker.sock"
    listen = f"{{unix: {socket}" + (f", tcp: '{tcp}'" if tcp else "") + "}"
    text = (f"listen: {listen}\n"
            f"workers: {workers}\n"
            "memory_budget: 256MiB\n"
            "datasets:\n"
            f"  train: {{path: {dataset}}}\n"
            "pipelines:\n" + TRAIN_PIPELINE + pipelines)
    if helpers is not None:
        addresses = ", ".join(f"'{a}'" for a in helpers)
        text += (f"helpers: {{addresses: [{addresses}], "
                 "placement: remote_first, chunk_steps: 2, "
                 "stall_seconds: 2}\n")
    config = folder / "stoker.yaml"
    config.write_text(text)
    return Daemon(config, socket)


def tcp_port(daemon):
    """The TCP port a daemon logged it listens on."""
    for line in reversed(daemon.log().splitlines()):
        m = re.search(r"event=listening .*tcp=(\d+)", line)
        if m:
            return int(m.group(1))
    raise AssertionError("no TCP port in the log: " + daemon.log())


def stream(daemon, *extra, epochs=2, pipeline="train", batch_size=4,
           check=True):
    out = run([STOKER, "stream", "--address", daemon.address, "--dataset",
               "train", "--pipeline", pipeline, "--batch-size", batch_size,
               "--epochs", epochs, "--seed", 11, "--prefetch", 4, "--transport", "grpc",
               "--json", "--quiet", *extra], check=check)
    return json.loads(out.stdout.strip().splitlines()[-1])


def closed_stream_counts(daemon):
    """remote_batches and remote_rebuilt of the last stream_close line."""
    lines = [l for l in daemon.log().splitlines()
             if "event=stream_close" in l and "job=helper:" not in l]
    assert lines, daemon.log()
    fields = dict(re.findall(r"(\w+)=(\S+)", lines[-1]))
    return int(fields["remote_batches"]), int(fields["remote_rebuilt"])


def wait_for_log(daemon, pattern, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if re.search(pattern, daemon.log()):
            return
        time.sleep(0.05)
    raise AssertionError(f"{pattern!r} not in the log: " + daemon.log())


@pytest.fixture
def daemons(dataset, tmp_path):
    started = []

    def start(d):
        started.append(d)
        return d.start()

    yield start
    for d in started:
        d.stop()


def test_a_helper_builds_batches_and_the_trainer_gets_the_same_bytes(
        dataset, tmp_path, daemons):
    helper = daemons(daemon_config(tmp_path / "helper", dataset,
                                   tcp="127.0.0.1:0"))
    reference = stream(helper)  # The helper is an ordinary daemon.
    node = daemons(daemon_config(
        tmp_path / "node", dataset,
        helpers=[f"127.0.0.1:{tcp_port(helper)}"]))
    wait_for_log(node, r"event=helper_up")
    got = stream(node)
    assert got["status"] == "OK"
    assert got["content_digest"] == reference["content_digest"]
    assert got["samples"] == 60
    remote, rebuilt = closed_stream_counts(node)
    assert remote > 0 and rebuilt == 0, node.log()


# The consumer's time per batch: the ten kills and restarts must fit in the
# stream, and the sanitized daemons start several times slower.
STEP_MS = 40 if os.environ.get("STOKER_SANITIZED") else 10

SLOW_PIPELINE = """\
  slow:
    - decode_jpeg: {}
    - random_resized_crop: {size: 112}
    - random_flip: {}
    - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], dtype: float32}
    - layout: chw
"""


def test_a_helper_killed_ten_times_loses_and_repeats_nothing(tmp_path,
                                                             daemons):
    # Bigger photos and outputs than the other tests', so that the helper
    # (remote_first, one worker) spends much of the stream building: many
    # kills land while it builds a chunk, which the node then builds itself.
    src = tmp_path / "src"
    run([sys.executable, ROOT / "bench" / "make_images.py", src, "--count",
         30, "--classes", 3, "--seed", 4, "--min-size", 200, "--max-size",
         320, "--jobs", 1])
    big = tmp_path / "big"
    run([STOKER, "pack", src, big])
    epochs = 100
    helper_dir = tmp_path / "helper"
    helper = daemons(daemon_config(helper_dir, big, tcp="127.0.0.1:0",
                                   pipelines=SLOW_PIPELINE))
    port = tcp_port(helper)
    reference = stream(helper, epochs=epochs, pipeline="slow", batch_size=10)
    node = daemons(daemon_config(tmp_path / "node", big,
                                 helpers=[f"127.0.0.1:{port}"],
                                 pipelines=SLOW_PIPELINE))
    wait_for_log(node, r"event=helper_up")
    ids_file = tmp_path / "ids.txt"
    consumer = subprocess.Popen(
        [str(STOKER), "stream", "--address", node.address, "--dataset",
         "train", "--pipeline", "slow", "--batch-size", "10", "--epochs",
         str(epochs), "--seed", "11", "--prefetch", "4", "--transport",
         "grpc", "--step-ms", str(STEP_MS), "--indices-out", str(ids_file),
         "--json", "--quiet"], stdout=subprocess.PIPE, text=True)
    restarted = daemon_config(helper_dir, big, tcp=f"127.0.0.1:{port}",
                              pipelines=SLOW_PIPELINE)
    # Kills at points of the consumer's progress, so that all ten land
    # within the stream however fast this machine is: batch 20, 45, ...
    kills = 0
    while kills < 10 and consumer.poll() is None:
        received = len(ids_file.read_text().split()) // 10 \
            if ids_file.exists() else 0
        if received < 20 + 25 * kills:
            time.sleep(0.005)
            continue
        helper.proc.send_signal(signal.SIGKILL)
        helper.proc.wait()
        kills += 1
        helper = daemons(restarted)
    out, _ = consumer.communicate(timeout=120)
    assert kills == 10, "the stream ended before ten kills: make it longer"
    got = json.loads(out.strip().splitlines()[-1])
    assert got["status"] == "OK", node.log()
    assert got["content_digest"] == reference["content_digest"]
    ids = [int(line) for line in ids_file.read_text().split()]
    assert len(ids) == epochs * 30
    for epoch in range(epochs):
        assert sorted(ids[epoch * 30:(epoch + 1) * 30]) == list(range(30))
    remote, rebuilt = closed_stream_counts(node)
    assert remote > 0 and rebuilt > 0, node.log()
    assert "event=helper_down" in node.log()


def test_a_helper_with_another_pack_of_the_dataset_is_refused(
        dataset, tmp_path, daemons):
    other = tmp_path / "other"
    run([STOKER, "pack", make_images(tmp_path / "src", 30, seed=9), other])
    helper = daemons(daemon_config(tmp_path / "helper", other,
                                   tcp="127.0.0.1:0"))
    node = daemons(daemon_config(
        tmp_path / "node", dataset,
        helpers=[f"127.0.0.1:{tcp_port(helper)}"]))
    wait_for_log(node, r"event=helper_up")
    got = stream(node)
    assert got["status"] == "OK" and got["samples"] == 60
    assert closed_stream_counts(node) == (0, 0)
    assert re.search(r"event=helper_refused .*dataset=train .*manifest digest",
                     node.log()), node.log()


def test_a_node_builds_everything_itself_while_its_helper_is_down(
        dataset, tmp_path, daemons):
    # Nothing listens on the helper's address.
    helper = daemons(daemon_config(tmp_path / "helper", dataset,
                                   tcp="127.0.0.1:0"))
    port = tcp_port(helper)
    helper.stop()
    node = daemons(daemon_config(tmp_path / "node", dataset,
                                 helpers=[f"127.0.0.1:{port}"]))
    got = stream(node)
    assert got["status"] == "OK" and got["samples"] == 60
    assert closed_stream_counts(node) == (0, 0)


def test_a_stalled_helper_is_given_up_and_its_chunks_built_here(
        dataset, tmp_path, daemons):
    # SIGSTOP keeps the helper's connections open and silent: only the
    # stall timeout (stall_seconds: 2) can tell.
    helper = daemons(daemon_config(tmp_path / "helper", dataset,
                                   tcp="127.0.0.1:0"))
    reference = stream(helper, epochs=20)
    node = daemons(daemon_config(tmp_path / "node", dataset,
                                 helpers=[f"127.0.0.1:{tcp_port(helper)}"]))
    wait_for_log(node, r"event=helper_up")
    helper.signal(signal.SIGSTOP)
    try:
        got = stream(node, epochs=20)
    finally:
        helper.signal(signal.SIGCONT)
    assert got["status"] == "OK", node.log()
    assert got["content_digest"] == reference["content_digest"]
    assert re.search(r"event=helper_down .*DEADLINE_EXCEEDED: no batch for 2 s",
                     node.log()), node.log()
    assert closed_stream_counts(node)[1] > 0
