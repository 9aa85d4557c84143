"""The daemon and the CLI end to end, as separate processes."""
import json
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import BUILD, STOKER, STOKERD, Daemon, run, write_config


def stream(daemon, *args, pipeline="train", check=True):
    out = run([STOKER, "stream", "--address", daemon.address, "--dataset",
               "train", "--pipeline", pipeline, "--json", "--quiet", *args],
              check=check)
    return json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout else out


def read_ids(path):
    return [int(line) for line in path.read_text().split()]


def test_one_epoch_delivers_every_sample_once(daemon, tmp_path):
    ids = tmp_path / "ids.txt"
    result = stream(daemon, "--batch-size", 4, "--indices-out", ids)
    assert result["samples"] == 30
    assert result["batches"] == 8
    assert result["skipped_samples"] == 0
    assert result["samples_per_second"] > 0
    assert len(result["content_digest"]) == 16
    assert sorted(read_ids(ids)) == list(range(30))


def test_same_request_same_digest_other_seed_other_digest(daemon):
    a = stream(daemon, "--batch-size", 5, "--seed", 3)
    b = stream(daemon, "--batch-size", 5, "--seed", 3)
    c = stream(daemon, "--batch-size", 5, "--seed", 4)
    assert a["content_digest"] == b["content_digest"]
    assert a["content_digest"] != c["content_digest"]


def test_three_ranks_cover_an_epoch_exactly_once(daemon, tmp_path):
    seen = []
    for rank in range(3):
        ids = tmp_path / f"ids{rank}.txt"
        stream(daemon, "--batch-size", 4, "--rank", rank, "--world-size", 3,
               "--job-id", "j", "--indices-out", ids)
        seen += read_ids(ids)
    assert sorted(seen) == list(range(30))


def test_resume_from_printed_position_matches_one_run(daemon, tmp_path):
    whole = stream(daemon, "--batch-size", 4, "--epochs", 2,
                   "--indices-out", tmp_path / "whole.txt")
    head = stream(daemon, "--batch-size", 4, "--epochs", 2, "--max-batches", 11,
                  "--indices-out", tmp_path / "head.txt")
    pos = head["next_position"]
    assert pos == {"epoch": 1, "step": 3}
    stream(daemon, "--batch-size", 4, "--epochs", 2, "--start-epoch",
           pos["epoch"], "--start-step", pos["step"],
           "--indices-out", tmp_path / "tail.txt")
    joined = read_ids(tmp_path / "head.txt") + read_ids(tmp_path / "tail.txt")
    assert joined == read_ids(tmp_path / "whole.txt")
    assert whole["samples"] == 60


def test_sigterm_stops_the_daemon_cleanly(daemon):
    client = subprocess.Popen(
        [str(STOKER), "stream", "--address", daemon.address, "--dataset",
         "train", "--pipeline", "train", "--batch-size", "2", "--epochs", "0",
         "--step-ms", "5", "--quiet"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)
        daemon.signal(signal.SIGTERM)
        assert daemon.wait(timeout=20) == 0
        assert not daemon.socket.exists()
        log = daemon.log()
        assert "event=stopping" in log and "event=stopped" in log
    finally:
        client.kill()
        client.wait()


def test_client_resumes_exactly_after_kill_9_and_restart(daemon, tmp_path):
    ids = tmp_path / "ids.txt"
    client = subprocess.Popen(
        [str(STOKER), "stream", "--address", daemon.address, "--dataset",
         "train", "--pipeline", "train", "--batch-size", "3", "--epochs", "4",
         "--step-ms", "20", "--json", "--quiet", "--indices-out", str(ids)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.4)
        assert client.poll() is None, "the stream ended before the kill"
        daemon.proc.kill()
        daemon.wait()
        time.sleep(0.3)
        daemon.start()
        out, err = client.communicate(timeout=120)
    finally:
        if client.poll() is None:
            client.kill()
    assert client.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["reconnects"] >= 1
    delivered = read_ids(ids)
    assert len(delivered) == 120
    for epoch in range(4):
        assert sorted(delivered[epoch * 30:(epoch + 1) * 30]) == list(range(30))


def wait_until(predicate, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("transport", ["grpc", "shm"])
def test_a_client_killed_mid_epoch_is_logged_cancelled_with_why(
        daemon, transport):
    ids = daemon.socket.parent / "ids.txt"
    client = subprocess.Popen(
        [str(STOKER), "stream", "--address", daemon.address, "--dataset",
         "train", "--pipeline", "train", "--batch-size", "3", "--epochs", "0",
         "--step-ms", "20", "--transport", transport, "--quiet",
         "--indices-out", str(ids)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: ids.exists() and len(ids.read_text().split()) >= 6,
                   "two batches")
        client.kill()
        client.wait()
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    wait_until(lambda: "event=stream_close" in daemon.log(), "stream_close")
    close = [l for l in daemon.log().splitlines() if "event=stream_close" in l]
    assert len(close) == 1 and "status=CANCELLED" in close[0], daemon.log()
    assert "level=info event=stream_cancelled" in daemon.log()
    assert "reason=" in daemon.log()


def test_bad_request_gets_a_clear_status(daemon):
    out = run([STOKER, "stream", "--address", daemon.address, "--dataset",
               "nope", "--pipeline", "train", "--batch-size", 4], check=False)
    assert out.returncode == 1
    assert "NOT_FOUND" in out.stderr and "'nope'" in out.stderr
    out = run([STOKER, "stream", "--address", daemon.address, "--dataset",
               "train", "--pipeline", "train", "--batch-size", 0], check=False)
    assert "INVALID_ARGUMENT" in out.stderr and "max_batch_size" in out.stderr


@pytest.mark.parametrize("weight", ["1e-300", "-1", "nan", "1e9"])
def test_a_weight_outside_its_bound_is_refused_naming_it(daemon, weight):
    out = run([STOKER, "stream", "--address", daemon.address, "--dataset",
               "train", "--pipeline", "train", "--batch-size", 4, "--weight",
               weight, "--max-batches", 1], check=False)
    assert out.returncode == 1, out.stderr
    assert "INVALID_ARGUMENT" in out.stderr, out.stderr
    assert "weight" in out.stderr and "[0.001, 1e+06]" in out.stderr


def test_check_config_says_to_create_a_missing_socket_folder(
        dataset, tmp_path):
    folder = tmp_path / "run" / "stoker"
    config = write_config(tmp_path / "stoker.yaml", dataset,
                          folder / "stoker.sock")
    out = run([STOKERD, "--config", config, "--check-config"], check=False)
    assert out.returncode == 1
    assert f"the folder {folder} of the socket" in out.stderr, out.stderr
    assert f"mkdir -p {folder}" in out.stderr
    folder.mkdir(parents=True)
    assert run([STOKERD, "--config", config, "--check-config"]).returncode == 0


def test_check_config_names_the_line_of_a_mistake(dataset, tmp_path):
    config = write_config(tmp_path / "stoker.yaml", dataset,
                          tmp_path / "s.sock")
    assert run([STOKERD, "--config", config, "--check-config"]).returncode == 0
    text = config.read_text().replace("random_flip", "random_flop")
    config.write_text(text)
    out = run([STOKERD, "--config", config, "--check-config"], check=False)
    assert out.returncode == 1
    line = text.splitlines().index("    - random_flop: {}") + 1
    assert f"stoker.yaml:{line}:" in out.stderr
    assert "random_flop" in out.stderr


def test_check_config_and_a_refused_second_daemon_leave_the_sockets(daemon):
    shm_socket = Path(f"{daemon.socket}.shm")
    assert shm_socket.exists()
    out = run([STOKERD, "--config", daemon.config, "--check-config"])
    assert out.returncode == 0
    assert daemon.socket.exists() and shm_socket.exists()
    second = run([STOKERD, "--config", daemon.config], check=False)
    assert second.returncode == 1
    assert str(daemon.socket) in second.stderr, second.stderr
    assert f"pid {daemon.proc.pid}" in second.stderr, second.stderr
    assert daemon.socket.exists() and shm_socket.exists()
    for transport in ("grpc", "shm"):
        got = stream(daemon, "--batch-size", 4, "--transport", transport,
                     "--max-batches", 1)
        assert got["batches"] == 1, got


def test_daemon_refuses_a_missing_dataset_directory(tmp_path):
    config = write_config(tmp_path / "stoker.yaml", tmp_path / "missing",
                          tmp_path / "s.sock")
    out = run([STOKERD, "--config", config], check=False)
    assert out.returncode == 1
    assert "stoker.yaml:5:" in out.stderr and "missing" in out.stderr


def test_sighup_reloads_and_a_bad_config_keeps_the_old_one(daemon):
    config = daemon.config
    good = config.read_text()
    config.write_text(good + """\
  small:
    - decode_jpeg: {}
    - center_crop: {size: 16}
""")
    daemon.signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while True:
        out = run([STOKER, "stream", "--address", daemon.address, "--dataset",
                   "train", "--pipeline", "small", "--batch-size", 5, "--json",
                   "--quiet"], check=False)
        if out.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["samples"] == 30

    config.write_text(good + "  broken:\n    - decode_jpg: {}\n")
    daemon.signal(signal.SIGHUP)
    time.sleep(0.5)
    assert daemon.proc.poll() is None
    out = stream(daemon, "--batch-size", 5, pipeline="small")
    assert out["samples"] == 30  # The last good config is still in force.
    daemon.stop()
    log = daemon.log()
    assert "event=reloaded" in log
    assert "event=reload_refused" in log and "decode_jpg" in log


def test_standard_health_service_answers_serving(daemon):
    import grpc
    with grpc.insecure_channel(daemon.address) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        # HealthCheckRequest{} is empty; HealthCheckResponse{status: SERVING}
        # is field 1 = 1 on the wire.
        assert check(b"", timeout=10) == b"\x08\x01"


def version_lines():
    out = run([STOKERD, "--version"])
    lines = out.stdout.splitlines()
    assert len(lines) == 3, out.stdout
    return lines


def test_version_says_whether_cuda_is_built_and_what_it_sees():
    name, formats, cuda = version_lines()
    assert re.fullmatch(r"stokerd \d+\.\d+\.\d+", name), name
    # JPEG and PNG always; WebP and TIFF unless built without their library.
    assert re.fullmatch(r"image formats: JPEG PNG( WebP)?( TIFF)?"
                        r"( \(built without: (WebP ?)?(TIFF)?\))?", formats), formats
    if cuda.startswith("CUDA: not built"):
        assert cuda == ("CUDA: not built (STOKER_CUDA=OFF or no toolkit at "
                        "build time)")
    else:
        # Built: either the GPUs, each with its UUID, or the driver's reason.
        assert re.match(r"CUDA: built \(runtime \d+\.\d+\), driver ", cuda), cuda
        assert (re.search(r"\d+ GPUs?: 0 GPU-[0-9a-f]{8}-", cuda)
                or "no GPU usable: cudaGetDeviceCount failed with " in cuda), cuda
    assert "--version" in run([STOKERD, "--help"]).stdout


def test_the_cuda_runtime_is_linked_statically_if_at_all():
    # With CUDA built in, stokerd must still start where no libcudart.so is.
    for binary in (STOKERD, BUILD / "client" / "libstoker_client.so"):
        dynamic = run(["readelf", "-d", binary]).stdout.splitlines()
        needed = [line for line in dynamic if "(NEEDED)" in line]
        assert needed, binary
        assert not [n for n in needed if "libcuda" in n], needed


def test_startup_log_states_the_cuda_facts_of_version(daemon):
    _, _, cuda = version_lines()
    line = next(l for l in daemon.log().splitlines() if "event=cuda " in l)
    built = "no" if cuda.startswith("CUDA: not built") else "yes"
    assert f"built={built}" in line
    detail = (cuda.removeprefix("CUDA: ").replace("\\", "\\\\")
              .replace('"', '\\"'))
    assert f'detail="{detail}"' in line, line
