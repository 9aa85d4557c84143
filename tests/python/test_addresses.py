"""Daemon addresses a new user gets wrong, in the CLI and the Python client:
a socket path without `unix:`, and a socket that does not exist. Each fails
at once, saying what to write, instead of after gRPC's 30 s connect timeout
with a DNS error or "no connection"."""
import time

import pytest

import stoker
from conftest import STOKER, run

STREAM = ["--dataset", "train", "--pipeline", "train", "--batch-size", "4"]


@pytest.mark.parametrize("command", [["stream", *STREAM], ["top", "--once"]])
def test_the_cli_refuses_a_socket_path_without_unix_at_once(daemon, command):
    started = time.monotonic()
    out = run([STOKER, command[0], "--address", daemon.socket, *command[1:]],
              check=False)
    assert time.monotonic() - started < 10
    assert out.returncode == 1
    assert f"unix:{daemon.socket}" in out.stderr, out.stderr


@pytest.mark.parametrize("command", [["stream", *STREAM], ["top", "--once"]])
def test_the_cli_names_a_missing_socket_at_once(tmp_path, command):
    missing = tmp_path / "none.sock"
    started = time.monotonic()
    out = run([STOKER, command[0], "--address", f"unix:{missing}",
               *command[1:]], check=False)
    assert time.monotonic() - started < 10
    assert out.returncode == 1
    assert f"no socket at {missing}" in out.stderr, out.stderr


def test_the_cli_still_takes_host_and_port():
    # A TCP address is not a path: nothing listens on port 1, so the
    # connect is tried and fails as unreachable.
    out = run([STOKER, "top", "--once", "--address", "127.0.0.1:1"],
              check=False)
    assert out.returncode == 1
    assert "looks like a file path" not in out.stderr


@pytest.mark.parametrize("address", ["/run/stoker/stoker.sock",
                                     "stoker.sock", "./stoker.sock"])
def test_python_refuses_a_socket_path_without_unix(address):
    with pytest.raises(ValueError, match=f"'unix:{address}'"):
        stoker.Client(address)


def test_python_refuses_an_existing_socket_path_without_unix(daemon):
    with pytest.raises(ValueError, match="unix:"):
        stoker.Client(str(daemon.socket))


def test_python_names_a_missing_socket_at_once(tmp_path):
    missing = tmp_path / "none.sock"
    client = stoker.Client(f"unix:{missing}")
    started = time.monotonic()
    with pytest.raises(stoker.Unavailable, match=f"no socket at {missing}"):
        client.datasets()
    with pytest.raises(stoker.Unavailable, match=f"no socket at {missing}"):
        client.stream("train", "train", batch_size=4)
    assert time.monotonic() - started < 10
