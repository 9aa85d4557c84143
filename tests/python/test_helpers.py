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
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import (ROOT, STOKER, STOKERD, TRAIN_PIPELINE, Daemon,
                      make_images, run)
from pki import make_pki


def daemon_config(folder, dataset, tcp=None, helpers=None, workers=1,
                  pipelines="", policy="placement: remote_first, "
                  "chunk_steps: 2, stall_seconds: 2", listen_extra="",
                  prefix=(), extra=""):
    folder.mkdir(parents=True, exist_ok=True)
    socket = folder / "stoker.sock"
    listen = (f"{{unix: {socket}" + (f", tcp: '{tcp}'" if tcp else "") +
              listen_extra + "}")
    text = (f"listen: {listen}\n"
            f"workers: {workers}\n"
            "memory_budget: 256MiB\n"
            "datasets:\n"
            f"  train: {{path: {dataset}}}\n"
            "pipelines:\n" + TRAIN_PIPELINE + pipelines + extra)
    if helpers is not None:
        addresses = ", ".join(f"'{a}'" for a in helpers)
        text += f"helpers: {{addresses: [{addresses}], {policy}}}\n"
    config = folder / "stoker.yaml"
    config.write_text(text)
    return Daemon(config, socket, prefix)


def tcp_port(daemon):
    """The TCP port a daemon logged it listens on. The unix socket may
    exist a moment before the line is written: wait for the line."""
    pattern = r"event=listening .*tcp=(\d+)"
    wait_for_log(daemon, pattern, timeout=30)
    return int(re.search(pattern, daemon.log()).group(1))


def stream(daemon, *extra, epochs=2, pipeline="train", batch_size=4,
           check=True, transport="grpc"):
    out = run([STOKER, "stream", "--address", daemon.address, "--dataset",
               "train", "--pipeline", pipeline, "--batch-size", batch_size,
               "--epochs", epochs, "--seed", 11, "--prefetch", 4,
               "--transport", transport, "--json", "--quiet", *extra],
              check=check)
    return json.loads(out.stdout.strip().splitlines()[-1])


def closed_stream_counts(daemon):
    """remote_batches and remote_rebuilt of the last stream_close line.
    The daemon writes it once the stream's last task has finished, which
    may come a moment after the consumer had its last batch: wait for it."""
    deadline = time.monotonic() + 30
    while True:
        lines = [l for l in daemon.log().splitlines()
                 if "event=stream_close" in l and "job=helper:" not in l]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert lines, daemon.log()
    fields = dict(re.findall(r"(\w+)=(\S+)", lines[-1]))
    return int(fields["remote_batches"]), int(fields["remote_rebuilt"])


def assert_each_sample_once(ids_file, epochs, samples):
    """The ids a consumer wrote (--indices-out): every sample of each
    epoch once."""
    ids = [int(line) for line in ids_file.read_text().split()]
    assert len(ids) == epochs * samples
    for epoch in range(epochs):
        assert (sorted(ids[epoch * samples:(epoch + 1) * samples]) ==
                list(range(samples)))


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
    assert_each_sample_once(ids_file, epochs, 30)
    remote, rebuilt = closed_stream_counts(node)
    assert remote > 0 and rebuilt > 0, node.log()
    assert "event=helper_down" in node.log()


def test_a_helper_with_a_lower_decode_limit_never_makes_the_node_skip(
        dataset, tmp_path, daemons):
    # The helper skips most images (over its max_decode_pixels); the node,
    # with the default limit, decodes them all: what the helper skipped is
    # built on the node, and the trainer gets every sample once.
    plain = daemons(daemon_config(tmp_path / "plain", dataset))
    reference = stream(plain)
    helper = daemons(daemon_config(
        tmp_path / "helper", dataset, tcp="127.0.0.1:0",
        extra="limits: {max_decode_pixels: 2000}\n"))
    node = daemons(daemon_config(
        tmp_path / "node", dataset,
        helpers=[f"127.0.0.1:{tcp_port(helper)}"]))
    wait_for_log(node, r"event=helper_up")
    ids = tmp_path / "ids.txt"
    got = stream(node, "--indices-out", ids)
    assert got["status"] == "OK" and got["samples"] == 60, got
    assert_each_sample_once(ids, 2, 30)
    assert got["content_digest"] == reference["content_digest"]
    _, rebuilt = closed_stream_counts(node)
    assert rebuilt > 0, node.log()
    # A first chunk that skipped samples leaves the helper up (it may have
    # met a record corrupt there); the next one in a row marks it down.
    log = node.log()
    skipped = re.search(r"event=helper_skipped .*skipped", log)
    down = re.search(r"event=helper_down .*skipped", log)
    assert skipped and down and skipped.start() < down.start(), log


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
    assert re.search(r"event=helper_refused .*dataset=train .*content digest",
                     node.log()), node.log()


def pack_with_labels(tmp_path, name, images, shift):
    """Packs `images` (an ImageFolder) from a list file whose labels are
    shifted by `shift`: records of the same sizes, other labels."""
    files = sorted(p for p in images.rglob("*.jpg"))
    listing = tmp_path / f"{name}.csv"
    listing.write_text("image,label\n" + "".join(
        f"{f},{(i + shift) % 3}\n" for i, f in enumerate(files)))
    out = tmp_path / name
    run([STOKER, "pack", "--from", "list", listing, out, "--field",
         "image:image", "--field", "label:int64", "--shards", 2])
    return out


def test_a_helper_with_other_records_beside_a_copied_manifest_is_refused(
        images, tmp_path, daemons):
    ours = pack_with_labels(tmp_path, "ours", images, 0)
    theirs = pack_with_labels(tmp_path, "theirs", images, 1)
    # The same manifest file, other records (labels) of the same sizes.
    (theirs / "manifest.json").write_bytes(
        (ours / "manifest.json").read_bytes())
    plain = daemons(daemon_config(tmp_path / "plain", ours))
    reference = stream(plain)
    helper = daemons(daemon_config(tmp_path / "helper", theirs,
                                   tcp="127.0.0.1:0"))
    node = daemons(daemon_config(
        tmp_path / "node", ours, helpers=[f"127.0.0.1:{tcp_port(helper)}"]))
    wait_for_log(node, r"event=helper_up")
    got = stream(node)
    assert got["status"] == "OK" and got["samples"] == 60
    assert got["content_digest"] == reference["content_digest"]
    assert closed_stream_counts(node) == (0, 0)
    assert re.search(r"event=helper_refused .*dataset=train .*content digest",
                     node.log()), node.log()


def test_packs_made_before_the_content_digest_get_it_from_their_records(
        dataset, tmp_path, daemons):
    old = []
    for name in ("node-data", "helper-data"):
        copy = tmp_path / name
        shutil.copytree(dataset, copy)
        manifest = json.loads((copy / "manifest.json").read_text())
        manifest.pop("content_digest", None)  # As pack wrote it before.
        (copy / "manifest.json").write_text(json.dumps(manifest))
        old.append(copy)
    helper = daemons(daemon_config(tmp_path / "helper", old[1],
                                   tcp="127.0.0.1:0"))
    node = daemons(daemon_config(
        tmp_path / "node", old[0], helpers=[f"127.0.0.1:{tcp_port(helper)}"]))
    wait_for_log(node, r"event=helper_up")
    got = stream(node)
    assert got["status"] == "OK" and got["samples"] == 60
    remote, rebuilt = closed_stream_counts(node)
    assert remote > 0 and rebuilt == 0, node.log()


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


def big_dataset(tmp_path, count=30):
    """Photos large enough that decoding them keeps one core busy."""
    src = tmp_path / "src-big"
    run([sys.executable, ROOT / "bench" / "make_images.py", src, "--count",
         count, "--classes", 3, "--seed", 4, "--min-size", 200, "--max-size",
         320, "--jobs", 1])
    big = tmp_path / "big"
    run([STOKER, "pack", src, big])
    return big


def two_cores():
    """Two CPUs this process may use, to pin a node and a helper apart; or
    None where there are fewer (the daemons then share what there is)."""
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else None


def pinned(core):
    return () if core is None else ("taskset", "-c", core)


def test_a_node_of_one_core_with_a_helper_of_one_core_sends_each_sample_once(
        tmp_path, daemons):
    # Daemons pinned to separate cores stand for machines;
    # the node places chunks by its default policy (local first), and the
    # trainer gets the node-alone stream byte for byte, each sample once.
    big = big_dataset(tmp_path)
    cores = two_cores() or (None, None)
    epochs = 60
    alone = daemons(daemon_config(tmp_path / "alone", big,
                                  pipelines=SLOW_PIPELINE,
                                  prefix=pinned(cores[0])))
    reference = stream(alone, epochs=epochs, pipeline="slow", batch_size=10,
                       transport="shm")
    alone.stop()
    helper = daemons(daemon_config(tmp_path / "helper", big,
                                   tcp="127.0.0.1:0", pipelines=SLOW_PIPELINE,
                                   prefix=pinned(cores[1])))
    node = daemons(daemon_config(tmp_path / "node", big,
                                 helpers=[f"127.0.0.1:{tcp_port(helper)}"],
                                 pipelines=SLOW_PIPELINE,
                                 policy="placement: local_first",
                                 prefix=pinned(cores[0])))
    wait_for_log(node, r"event=helper_up")
    ids_file = tmp_path / "ids.txt"
    # Over shm, as a trainer on the node: the node's core builds batches
    # rather than sending them, so its worker pool is what saturates.
    got = stream(node, "--indices-out", ids_file, epochs=epochs,
                 pipeline="slow", batch_size=10, transport="shm")
    assert got["status"] == "OK", node.log()
    assert got["content_digest"] == reference["content_digest"]
    assert_each_sample_once(ids_file, epochs, 30)
    remote, rebuilt = closed_stream_counts(node)
    assert remote > 0 and rebuilt == 0, node.log()
    assert "event=helpers_placing remote=on" in node.log()


def test_a_node_that_keeps_up_sends_nothing_to_its_helper(
        dataset, tmp_path, daemons):
    # A consumer slower than the node's one worker: the pool is never
    # saturated, so local_first places no chunk on the idle helper.
    helper = daemons(daemon_config(tmp_path / "helper", dataset,
                                   tcp="127.0.0.1:0"))
    node = daemons(daemon_config(tmp_path / "node", dataset,
                                 helpers=[f"127.0.0.1:{tcp_port(helper)}"],
                                 policy="placement: local_first"))
    wait_for_log(node, r"event=helper_up")
    got = stream(node, "--step-ms", 40, epochs=2)
    assert got["status"] == "OK" and got["samples"] == 60
    assert closed_stream_counts(node) == (0, 0)
    assert "helpers_placing" not in node.log()


def test_helpers_over_tls_build_the_same_bytes_and_a_wrong_ca_is_refused(
        dataset, tmp_path, daemons):
    pki = make_pki(tmp_path / "pki")
    tls = f", tls: {{cert: {pki}/server.pem, key: {pki}/server.key}}"
    helper = daemons(daemon_config(tmp_path / "helper", dataset,
                                   tcp="127.0.0.1:0", listen_extra=tls))
    reference = stream(helper)
    address = f"127.0.0.1:{tcp_port(helper)}"
    node = daemons(daemon_config(
        tmp_path / "node", dataset, helpers=[address],
        policy=f"placement: remote_first, chunk_steps: 2, "
        f"tls: {{ca: {pki}/ca.pem}}"))
    wait_for_log(node, r"event=helper_up")
    got = stream(node)
    assert got["status"] == "OK"
    assert got["content_digest"] == reference["content_digest"]
    assert closed_stream_counts(node)[0] > 0, node.log()

    # A node that trusts another CA never gets past the handshake: the
    # helper stays down and the node builds everything itself.
    stranger = daemons(daemon_config(
        tmp_path / "stranger", dataset, helpers=[address],
        policy=f"placement: remote_first, tls: {{ca: {pki}/other-ca.pem}}"))
    wait_for_log(stranger, r"event=helper_down .*UNAVAILABLE")
    got = stream(stranger)
    assert got["status"] == "OK"
    assert got["content_digest"] == reference["content_digest"]
    assert closed_stream_counts(stranger) == (0, 0)
    assert "event=helper_up" not in stranger.log()


def test_a_helper_tls_file_that_cannot_be_read_stops_the_daemon(
        dataset, tmp_path):
    node = daemon_config(tmp_path / "node", dataset,
                         helpers=["127.0.0.1:7411"],
                         policy=f"tls: {{ca: {tmp_path}/missing.pem}}")
    out = run([STOKERD, "--config", node.config], check=False)
    assert out.returncode != 0
    assert f"helpers.tls.ca: cannot read '{tmp_path}/missing.pem'" in out.stderr
