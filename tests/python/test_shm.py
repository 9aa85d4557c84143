"""The shm transport at the process level: same bytes as grpc, nothing leaked
when either side is killed, and no other user can open a ring."""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import STOKER, Daemon, run, wait_for, write_config
from shm_names import held_shm_names, left_behind


def stream_cmd(daemon, *args):
    return [str(STOKER), "stream", "--address", daemon.address, "--dataset",
            "train", "--pipeline", "train", "--quiet", *map(str, args)]


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def ring_mappings(pid):
    with open(f"/proc/{pid}/maps") as maps:
        return sum("memfd:stoker-ring" in line for line in maps)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def start_endless_client(daemon, transport="shm"):
    client = subprocess.Popen(stream_cmd(daemon, "--batch-size", 4, "--epochs",
                                         0, "--transport", transport,
                                         "--step-ms", 2),
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    assert wait_for(lambda: ring_mappings(daemon.proc.pid) > 0, 10), \
        "the daemon never mapped a ring"
    return client


def test_shm_and_grpc_deliver_the_same_bytes(daemon):
    digests = {}
    for transport in ("grpc", "shm"):
        out = run(stream_cmd(daemon, "--batch-size", 7, "--epochs", 2, "--json",
                             "--transport", transport))
        result = json.loads(out.stdout)
        assert result["transport"] == transport
        assert result["notice_socket"] == (transport == "shm")
        digests[transport] = result["content_digest"]
    assert digests["grpc"] == digests["shm"]


def test_killed_client_frees_its_ring_within_a_second(daemon):
    pid = daemon.proc.pid
    fds_before = fd_count(pid)
    client = start_endless_client(daemon)
    client.kill()
    client.wait()
    assert wait_for(lambda: ring_mappings(pid) == 0, 1.0)
    assert wait_for(lambda: fd_count(pid) <= fds_before, 1.0)


def test_connect_and_kill_cycles_leave_fds_and_rss_flat(daemon):
    pid = daemon.proc.pid
    cycles = int(os.environ.get("STOKER_SHM_CYCLES", "200"))
    rss_warm = fds_warm = None
    for i in range(cycles):
        client = subprocess.Popen(
            stream_cmd(daemon, "--batch-size", 4, "--epochs", 0,
                       "--transport", "shm"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Kill only once the stream holds its ring, at varied moments after.
        assert wait_for(lambda: ring_mappings(pid) > 0, 10)
        time.sleep(0.005 * (i % 4))
        client.kill()
        client.wait()
        if i == 19:
            assert wait_for(lambda: ring_mappings(pid) == 0, 2)
            rss_warm, fds_warm = rss_kib(pid), fd_count(pid)
    assert wait_for(lambda: ring_mappings(pid) == 0, 2)
    assert wait_for(lambda: fd_count(pid) <= fds_warm, 2), \
        f"fds grew from {fds_warm} to {fd_count(pid)}"
    # Flat: no growth with the number of cycles beyond allocator noise.
    # (AddressSanitizer's quarantine holds freed memory on purpose, so RSS
    # says nothing there; its leak check runs at the daemon's exit instead.)
    if not os.environ.get("STOKER_SANITIZED"):
        assert rss_kib(pid) - rss_warm < 16 * 1024, \
            f"RSS grew from {rss_warm} KiB to {rss_kib(pid)} KiB"


def test_killed_daemon_leaves_nothing_in_dev_shm(daemon):
    # Only the daemon's own names count: tests beside this one create and
    # remove entries in /dev/shm of their own while it runs.
    client = start_endless_client(daemon)
    try:
        held = held_shm_names(daemon.proc.pid)
        daemon.proc.kill()
        daemon.wait()
    finally:
        client.kill()
        client.wait()
    assert left_behind(held) == set()


def test_the_dev_shm_check_sees_the_killed_process_names_only(tmp_path):
    # A process that holds a named /dev/shm file is killed: its file is
    # reported; a file another process makes meanwhile is not.
    tag = f"stoker-test-{os.getpid()}"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"""
import mmap, os, sys
fd = os.open("/dev/shm/{tag}-held", os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(fd, 4096)
m = mmap.mmap(fd, 4096)
print("ready", flush=True)
sys.stdin.read()
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    other = Path(f"/dev/shm/sem.mp-{tag}")
    try:
        assert holder.stdout.readline() == "ready\n"
        held = held_shm_names(holder.pid)
        assert held == {f"/dev/shm/{tag}-held"}
        other.write_bytes(b"")  # Another test's semaphore, say.
        holder.kill()
        holder.wait()
        assert left_behind(held) == {f"/dev/shm/{tag}-held"}
    finally:
        holder.kill()
        holder.wait()
        Path(f"/dev/shm/{tag}-held").unlink(missing_ok=True)
        other.unlink(missing_ok=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run as nobody")
def test_another_user_cannot_open_the_ring(dataset):
    # A world-readable folder and world-writable sockets, so that the user
    # `nobody` reaches the daemon: only the ring's credential check is left
    # to keep it out. (pytest's own temp folders are private to root.)
    base = Path(tempfile.mkdtemp(prefix="stoker-shm-"))
    base.chmod(0o755)
    socket = base / "stoker.sock"
    config = write_config(base / "stoker.yaml", dataset, socket)
    config.write_text(config.read_text().replace(
        f"listen: {{unix: {socket}}}",
        f"listen: {{unix: {socket}, unix_mode: \"0666\"}}"))
    daemon = Daemon(config, socket).start()
    try:
        as_nobody = dict(preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))
        exe = shutil.which(str(STOKER))
        assert os.stat(exe).st_mode & stat.S_IXOTH
        shm = subprocess.run(
            stream_cmd(daemon, "--batch-size", 4, "--transport", "shm"),
            capture_output=True, text=True, timeout=60, **as_nobody)
        assert shm.returncode == 1
        assert "PERMISSION_DENIED" in shm.stderr
        auto = subprocess.run(
            stream_cmd(daemon, "--batch-size", 4, "--transport", "auto",
                       "--json"),
            capture_output=True, text=True, timeout=60, **as_nobody)
        assert auto.returncode == 0, auto.stderr
        assert json.loads(auto.stdout)["transport"] == "grpc"
    finally:
        daemon.stop()
        shutil.rmtree(base)


def test_a_stream_that_fits_its_ring_waits_for_the_client_to_map_it(
        client_daemon):
    """All 3 batches fit in the ring (prefetch 4 + 1), so the daemon has
    built and sent them all before a slow client fetches the ring. The
    stream must not end (and take its ring out of the fd server) before the
    client has the ring."""
    import grpc
    from stoker._proto.stoker.v1 import stoker_pb2 as pb
    from stoker._proto.stoker.v1 import stoker_pb2_grpc as pb_grpc
    from stoker.transports import map_ring

    channel = grpc.insecure_channel(client_daemon.address)
    try:
        open_request = pb.StreamRequest(open=pb.OpenStream(
            dataset="train", pipeline="bytes", batch_size=10, epochs=1,
            prefetch=4, transport=pb.TRANSPORT_SHM))
        call = pb_grpc.StokerStub(channel).Stream(iter([open_request]))
        header = next(call).header
        assert header.steps_per_epoch == 3 and header.shm.slots == 5
        time.sleep(0.5)  # The daemon builds and sends every batch meanwhile.
        ring = map_ring(header.shm)  # PermissionDenied if the stream ended.
        ring.close()
        steps = [response.batch.step for response in call]
        assert steps == [0, 1, 2]
    finally:
        channel.close()


STALLER = r"""
import socket, sys, time
path, kind, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
held = []
for _ in range(count):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    held.append(s)
print("ready", flush=True)
end = time.monotonic() + 30
while time.monotonic() < end:  # Killed by the test long before.
    if kind == "slow":
        for s in held:
            try:
                s.send(b"x")  # One byte of a token every 0.9 s.
            except OSError:
                pass
    time.sleep(0.9)
"""


def test_idle_and_slow_connections_do_not_stall_an_shm_open(daemon):
    """The descriptor socket served one connection at a time, each with 1 s
    of grace: 20 idle connections (or three that send a byte every 0.9 s)
    made every shm open fail after 10 s."""
    stallers = [subprocess.Popen(
        [sys.executable, "-c", STALLER, f"{daemon.socket}.shm", kind, n],
        stdout=subprocess.PIPE, text=True)
        for kind, n in (("idle", "20"), ("slow", "3"))]
    try:
        for s in stallers:
            assert s.stdout.readline().strip() == "ready"
        began = time.monotonic()
        out = run(stream_cmd(daemon, "--batch-size", 4, "--transport", "shm",
                             "--json"))
        took = time.monotonic() - began
        assert json.loads(out.stdout)["transport"] == "shm"
        assert took < 8, f"the shm open took {took:.1f} s"
    finally:
        for s in stallers:
            s.kill()
            s.wait()
