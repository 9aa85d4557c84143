"""Jobs and shared runs against a real stokerd: two jobs opted in with
`share` get the same bytes over shm and grpc, built once, and say so in
`stoker stream --json` and on each Python batch; a stream that disagrees
with its job is refused naming the field."""
import json
import os
import subprocess
import time

import pytest
import xxhash

import stoker
from conftest import STOKER


def test_two_shared_cli_jobs_get_the_same_bytes_and_count_shared_batches(
        client_daemon):
    args = [STOKER, "stream", "--address", client_daemon.address, "--json",
            "--quiet", "--dataset", "train", "--pipeline", "bytes",
            "--batch-size", "3", "--seed", "5", "--epochs", "3", "--share",
            "--prefetch", "2", "--step-ms", "100"]
    procs = [subprocess.Popen(args + ["--job-id", job, "--transport", t],
                              stdout=subprocess.PIPE, text=True)
             for job, t in (("sweep-1", "shm"), ("sweep-2", "grpc"))]
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        results.append(json.loads(out.strip().splitlines()[-1]))
    a, b = results
    assert a["content_digest"] == b["content_digest"]
    assert a["batches"] == b["batches"] == 30
    # Started together, they share batches (how many depends on how soon
    # the second process opens: a run keeps the last 8 + prefetch batches).
    assert a["shared_batches"] > 0 and b["shared_batches"] > 0
    # Alone and unshared, the same bytes.
    alone = subprocess.run(
        [STOKER, "stream", "--address", client_daemon.address, "--json",
         "--quiet", "--dataset", "train", "--pipeline", "bytes",
         "--batch-size", "3", "--seed", "5", "--epochs", "3"],
        check=True, capture_output=True, text=True)
    solo = json.loads(alone.stdout.strip().splitlines()[-1])
    assert solo["content_digest"] == a["content_digest"]
    assert solo["shared_batches"] == 0


def mapped_file(pid, address):
    """The file of process `pid`'s mapping that holds `address`."""
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= address < hi:
                return fields[5].strip() if len(fields) > 5 else ""
    return ""


def run_rings(pid):
    with open(f"/proc/{pid}/maps") as maps:
        return sum("memfd:stoker-shared-run" in line for line in maps)


def test_python_streams_of_two_jobs_share_over_shm_in_place(client_daemon):
    client = stoker.Client(client_daemon.address)
    args = dict(batch_size=4, seed=9, epochs=2, share=True, prefetch=2)
    files = {"a": [], "b": []}
    with client.stream("train", "bytes", job_id="a", transport="shm",
                       **args) as s1, \
            client.stream("train", "bytes", job_id="b", transport="shm",
                          **args) as s2:
        assert s1.info.shared and s2.info.shared
        h1, h2, shared = xxhash.xxh3_64(), xxhash.xxh3_64(), 0
        for b1, b2 in zip(s1, s2):
            for h, batch, job in ((h1, b1, "a"), (h2, b2, "b")):
                for array in batch.values():
                    h.update(array)
                first = next(iter(batch.values()))
                files[job].append(mapped_file(
                    os.getpid(), first.__array_interface__["data"][0]))
                shared += batch.shared
                batch.release()
    assert h1.hexdigest() == h2.hexdigest()
    assert shared >= 2 * 16 - 4  # 30 samples / 4 = 8 steps x 2 epochs each.
    # Read in place from the run's ring, except the last window (prefetch 2
    # + hold 1), copied to the stream's own ring as it may be held past the
    # end.
    for job in "ab":
        assert len(files[job]) == 16
        assert all(f.startswith("/memfd:stoker-shared-run")
                   for f in files[job][:13]), files[job]
        assert all(f.startswith("/memfd:stoker-ring")
                   for f in files[job][13:]), files[job]
    # With its streams gone, the run and its ring are freed.
    deadline = time.monotonic() + 5
    while run_rings(client_daemon.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run_rings(client_daemon.proc.pid) == 0


def test_a_stream_that_disagrees_with_its_job_is_refused(client_daemon):
    client = stoker.Client(client_daemon.address)
    with client.stream("train", "bytes", batch_size=4, epochs=0, job_id="j",
                       world_size=2, rank=0, transport="grpc"):
        with pytest.raises(stoker.FailedPrecondition) as e:
            client.stream("train", "bytes", batch_size=8, epochs=0,
                          job_id="j", world_size=2, rank=1, transport="grpc")
        assert "job 'j': batch_size 4" in str(e.value)
        assert "asks for 8" in str(e.value)


def test_bad_share_arguments_raise_value_error(client_daemon):
    client = stoker.Client(client_daemon.address)
    with pytest.raises(ValueError, match="weight must be a number > 0"):
        client.stream("train", "bytes", batch_size=4, weight=0)
    with pytest.raises(ValueError, match="open_timeout"):
        client.stream("train", "bytes", batch_size=4, open_timeout="x")


def test_a_share_that_does_not_fit_the_budget_says_so(dataset, tmp_path):
    """A shared run needs lag_window + prefetch batches; where the budget has
    room for the stream but not for that, the stream builds alone and says
    why, in its header (--json), the log and the metrics."""
    from conftest import Daemon, write_config
    socket = tmp_path / "stoker.sock"
    config = write_config(tmp_path / "stoker.yaml", dataset, socket)
    config.write_text(config.read_text().replace(
        "memory_budget: 256MiB", "memory_budget: 1MiB\n"
        "sharing: {lag_window: 64}"))
    daemon = Daemon(config, socket).start()
    try:
        out = subprocess.run(
            [str(STOKER), "stream", "--address", daemon.address, "--dataset",
             "train", "--pipeline", "train", "--batch-size", "4",
             "--prefetch", "2", "--share", "--json", "--quiet"],
            capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        got = json.loads(out.stdout.strip().splitlines()[-1])
        assert got["samples"] == 30 and got["shared_batches"] == 0
        assert "no shared run" in got["share_refused"], got
        assert "memory_budget" in got["share_refused"], got
        assert "event=share_refused" in daemon.log()
    finally:
        daemon.stop()


@pytest.mark.parametrize("change", ["dataset", "pipeline"])
def test_a_rank_opened_after_a_reload_that_changed_its_job_is_refused(
        dataset, tmp_path, change):
    """A SIGHUP during a job that points its dataset at another pack of the
    same size, or redefines its pipeline: a rank opened after it must not
    join the job with the new one."""
    import signal
    from conftest import Daemon, make_images, run, write_config
    socket = tmp_path / "stoker.sock"
    config = write_config(tmp_path / "stoker.yaml", dataset, socket)
    daemon = Daemon(config, socket).start()
    try:
        client = stoker.Client(daemon.address)
        args = dict(batch_size=4, epochs=0, job_id="j", world_size=2,
                    transport="grpc")
        with client.stream("train", "train", rank=0, **args):
            text = config.read_text()
            if change == "dataset":
                other = tmp_path / "other"
                run([STOKER, "pack", make_images(tmp_path / "src", 30, seed=9),
                     other])
                text = text.replace(str(dataset), str(other))
            else:
                text = text.replace("random_resized_crop: {size: 32}",
                                    "random_resized_crop: {size: 24}")
            config.write_text(text)
            daemon.signal(signal.SIGHUP)
            deadline = time.monotonic() + 30
            while "event=reloaded" not in daemon.log():
                assert time.monotonic() < deadline, daemon.log()
                time.sleep(0.02)
            with pytest.raises(stoker.FailedPrecondition) as e:
                client.stream("train", "train", rank=1, **args)
            expected = ("holds other samples" if change == "dataset"
                        else "was redefined")
            assert expected in str(e.value), str(e.value)
    finally:
        daemon.stop()
