"""Who gets in: the unix socket's mode and group, TLS and mutual TLS on TCP
(the CLI and the Python client), plaintext listeners beyond loopback, and a
SIGHUP reload that leaves running streams alone."""
import grp
import json
import os
import re
import signal
import stat
import subprocess
import time

import pytest

import stoker
from conftest import STOKER, STOKERD, Daemon, run, write_config
from pki import make_pki


def start(tmp_path, dataset, listen_extra="", tcp=None, extra=""):
    """A daemon on a unix socket (and TCP `tcp` if given), with `listen_extra`
    added to its listen map. Returns (daemon, tcp port or None)."""
    socket = tmp_path / "stoker.sock"
    config = write_config(tmp_path / "stoker.yaml", dataset, socket, extra)
    listen = f"unix: {socket}"
    if tcp:
        listen += f", tcp: \"{tcp}\""
    if listen_extra:
        listen += ", " + listen_extra
    config.write_text(config.read_text().replace(
        f"listen: {{unix: {socket}}}", f"listen: {{{listen}}}"))
    daemon = Daemon(config, socket).start()
    try:
        # The socket accepts a moment before the daemon logs `listening`.
        wait_for_log(daemon, "event=listening")
        port = None
        if tcp:
            match = re.search(r"event=listening .*tcp=(\d+)", daemon.log())
            assert match, daemon.log()
            port = int(match.group(1))
    except BaseException:
        daemon.stop()
        raise
    return daemon, port


def cli_stream(address, *args, check=True):
    out = run([STOKER, "stream", "--address", address, "--dataset", "train",
               "--pipeline", "train", "--batch-size", 6, "--json", "--quiet",
               *args], check=check)
    if not check:
        return out
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- the unix socket --------------------------------------------------------

def other_group():
    """A group other than our effective one that we may give a socket to:
    one we belong to, or any group when we are root."""
    mine = [g for g in os.getgroups() if g != os.getegid()]
    if mine:
        return grp.getgrgid(mine[0])
    if os.geteuid() == 0:
        return next(g for g in grp.getgrall() if g.gr_gid != os.getegid())
    pytest.skip("this user belongs to no second group to give the socket to")


def test_unix_socket_gets_the_configured_mode_and_group(dataset, tmp_path):
    group = other_group()
    daemon, _ = start(tmp_path, dataset,
                      f"unix_mode: \"0640\", unix_group: {group.gr_name}")
    try:
        for path in (daemon.socket, daemon.socket.with_name("stoker.sock.shm")):
            st = os.stat(path)
            assert stat.S_ISSOCK(st.st_mode), path
            assert stat.S_IMODE(st.st_mode) == 0o640, (path, oct(st.st_mode))
            assert st.st_gid == group.gr_gid, path
        assert cli_stream(daemon.address)["samples"] == 30
    finally:
        daemon.stop()


def test_unix_socket_mode_defaults_to_0660(daemon):
    st = os.stat(daemon.socket)
    assert stat.S_IMODE(st.st_mode) == 0o660
    assert st.st_gid == os.getegid()


def test_unknown_unix_group_is_refused_at_start(dataset, tmp_path):
    socket = tmp_path / "s.sock"
    config = write_config(tmp_path / "stoker.yaml", dataset, socket)
    config.write_text(config.read_text().replace(
        f"listen: {{unix: {socket}}}",
        f"listen: {{unix: {socket}, unix_group: no-such-group-7411}}"))
    out = run([STOKERD, "--config", config], check=False)
    assert out.returncode == 1
    assert "listen.unix_group 'no-such-group-7411' is not a group" in out.stderr


# --- TLS --------------------------------------------------------------------

@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def tls_listen(pki, client_ca=False):
    text = f"tls: {{cert: {pki}/server.pem, key: {pki}/server.key"
    if client_ca:
        text += f", client_ca: {pki}/ca.pem"
    return text + "}"


def refused_by_python(address, **tls):
    client = stoker.Client(address, connect_timeout=3, **tls)
    with pytest.raises(stoker.errors.StokerError) as error:
        client.datasets()
    client.close()
    return error.value


def test_tls_client_streams_and_a_plaintext_client_is_refused(
        dataset, tmp_path, pki):
    daemon, port = start(tmp_path, dataset, tls_listen(pki), tcp="127.0.0.1:0")
    try:
        assert "tls=on" in daemon.log()
        plain = cli_stream(daemon.address)
        # The CLI (C++ client) over TLS: the same batches as the socket. The
        # certificate names 127.0.0.1 and localhost; the second is checked
        # with --tls-server-name (dialing "localhost" would resolve it with
        # c-ares, whose leak LeakSanitizer reports in the ASan pass).
        for name in ((), ("--tls-server-name", "localhost")):
            tls = cli_stream(f"127.0.0.1:{port}", "--tls-ca", pki / "ca.pem",
                             *name)
            assert tls["samples"] == 30
            assert tls["content_digest"] == plain["content_digest"]
        # A certificate that does not name the server is refused.
        assert isinstance(refused_by_python(
            f"127.0.0.1:{port}", tls_ca=str(pki / "ca.pem"),
            tls_server_name="node7.example"), stoker.errors.Unavailable)
        # The Python client over TLS.
        client = stoker.Client(f"127.0.0.1:{port}", tls_ca=str(pki / "ca.pem"))
        assert [d.name for d in client.datasets()] == ["train"]
        with client.stream("train", "train", 6, transport="grpc") as s:
            assert sum(len(b["label"]) for b in s) == 30
        client.close()

        # Plaintext to a TLS port gets nowhere: CLI and Python.
        out = run([STOKER, "top", "--once", "--interval", "0.1", "--address",
                   f"127.0.0.1:{port}"], check=False)
        assert out.returncode == 1 and "UNAVAILABLE" in out.stderr, out.stderr
        assert isinstance(refused_by_python(f"127.0.0.1:{port}"),
                          stoker.errors.Unavailable)
        # A client that trusts another CA refuses the daemon.
        out = run([STOKER, "top", "--once", "--interval", "0.1", "--address",
                   f"127.0.0.1:{port}", "--tls-ca", pki / "other-ca.pem"],
                  check=False)
        assert out.returncode == 1 and "UNAVAILABLE" in out.stderr, out.stderr
    finally:
        daemon.stop()


def test_mutual_tls_refuses_clients_without_a_valid_certificate(
        dataset, tmp_path, pki):
    daemon, port = start(tmp_path, dataset, tls_listen(pki, client_ca=True),
                         tcp="127.0.0.1:0")
    address = f"127.0.0.1:{port}"
    try:
        assert "tls=mutual" in daemon.log()
        good = cli_stream(address, "--tls-ca", pki / "ca.pem", "--tls-cert",
                          pki / "client.pem", "--tls-key", pki / "client.key")
        assert good["samples"] == 30
        client = stoker.Client(address, tls_ca=str(pki / "ca.pem"),
                               tls_cert=str(pki / "client.pem"),
                               tls_key=str(pki / "client.key"))
        assert [d.name for d in client.datasets()] == ["train"]
        client.close()

        def top(*tls):
            return run([STOKER, "top", "--once", "--interval", "0.1",
                        "--address", address, "--tls-ca", pki / "ca.pem",
                        *tls], check=False)

        # No certificate, or one from another CA: refused in the handshake.
        for tls in ((), ("--tls-cert", pki / "stranger.pem", "--tls-key",
                         pki / "stranger.key")):
            out = top(*tls)
            assert out.returncode == 1, (tls, out.stdout)
            assert "UNAVAILABLE" in out.stderr, out.stderr
        # stoker stream gives up after --open-timeout, saying why it could
        # not connect.
        start_time = time.monotonic()
        out = cli_stream(address, "--tls-ca", pki / "ca.pem",
                         "--open-timeout", 1, check=False)
        assert out.returncode == 1
        assert f"UNAVAILABLE: cannot reach stokerd at {address}: " in out.stderr
        assert time.monotonic() - start_time < 20
        assert isinstance(refused_by_python(address, tls_ca=str(pki / "ca.pem")),
                          stoker.errors.Unavailable)
        assert isinstance(refused_by_python(
            address, tls_ca=str(pki / "ca.pem"),
            tls_cert=str(pki / "stranger.pem"),
            tls_key=str(pki / "stranger.key")), stoker.errors.Unavailable)
        # The daemon is unharmed and still serves the right client.
        assert cli_stream(address, "--tls-ca", pki / "ca.pem", "--tls-cert",
                          pki / "client.pem", "--tls-key",
                          pki / "client.key")["samples"] == 30
    finally:
        daemon.stop()


def test_unreadable_tls_files_are_named(dataset, tmp_path, pki):
    socket = tmp_path / "s.sock"
    config = write_config(tmp_path / "stoker.yaml", dataset, socket)
    base = config.read_text()
    for listen, expected in [
        (f"tcp: 127.0.0.1:0, tls: {{cert: missing.pem, key: {pki}/server.key}}",
         f"listen.tls.cert: cannot read '{tmp_path}/missing.pem': No such file"),
        (f"tcp: 127.0.0.1:0, tls: {{cert: {pki}/server.pem, key: "
         f"{pki}/server.ext}}",
         f"listen.tls.key: '{pki}/server.ext' is not a PEM file"),
        (f"tcp: 127.0.0.1:0, tls: {{cert: {pki}/server.pem, key: "
         f"{pki}/server.key, client_ca: nope/ca.pem}}",
         f"listen.tls.client_ca: cannot read '{tmp_path}/nope/ca.pem'"),
    ]:
        config.write_text(base.replace(
            f"listen: {{unix: {socket}}}", f"listen: {{{listen}}}"))
        out = run([STOKERD, "--config", config, "--check-config"],
                  check=False)
        assert out.returncode == 1, listen
        assert expected in out.stderr, out.stderr
    # A key that does not match the certificate shows when binding.
    config.write_text(base.replace(
        f"listen: {{unix: {socket}}}",
        f"listen: {{tcp: 127.0.0.1:0, tls: {{cert: {pki}/server.pem, "
        f"key: {pki}/client.key}}}}"))
    out = run([STOKERD, "--config", config], check=False)
    assert out.returncode == 1
    assert (f"listen.tls.key {pki}/client.key does not belong to "
            f"listen.tls.cert {pki}/server.pem") in out.stderr, out.stderr
    # The clients name their files too.
    out = run([STOKER, "top", "--once", "--address", "127.0.0.1:1",
               "--tls-ca", tmp_path / "no-ca.pem"], check=False)
    assert out.returncode == 1
    assert f"cannot read the TLS CA '{tmp_path}/no-ca.pem'" in out.stderr
    with pytest.raises(ValueError, match="cannot read the TLS client key"):
        stoker.Client("127.0.0.1:1", tls_cert=str(pki / "client.pem"),
                      tls_key=str(tmp_path / "no.key"))


# --- listeners beyond loopback ----------------------------------------------

def test_plaintext_listener_beyond_loopback_is_refused(dataset, tmp_path):
    socket = tmp_path / "s.sock"
    config = write_config(tmp_path / "stoker.yaml", dataset, socket)
    config.write_text(config.read_text().replace(
        f"listen: {{unix: {socket}}}",
        f"listen: {{unix: {socket}, tcp: 0.0.0.0:0}}"))
    out = run([STOKERD, "--config", config], check=False)
    assert out.returncode == 1
    assert "stoker.yaml:1:" in out.stderr
    assert ("listen.tcp: 0.0.0.0:0 is reachable beyond this node and has no "
            "TLS") in out.stderr
    assert "listen.insecure_remote: true" in out.stderr
    assert not socket.exists()


def test_insecure_remote_starts_and_warns(dataset, tmp_path):
    daemon, port = start(tmp_path, dataset, "insecure_remote: true",
                         tcp="0.0.0.0:0")
    try:
        log = daemon.log()
        assert re.search(r"level=warning event=insecure_remote_listener "
                         r"tcp=0.0.0.0:0", log), log
        assert cli_stream(f"127.0.0.1:{port}")["samples"] == 30
    finally:
        daemon.stop()


def test_tls_listener_beyond_loopback_starts_without_warning(
        dataset, tmp_path, pki):
    daemon, port = start(tmp_path, dataset, tls_listen(pki), tcp="0.0.0.0:0")
    try:
        assert "insecure_remote" not in daemon.log()
        assert cli_stream(f"127.0.0.1:{port}", "--tls-ca",
                          pki / "ca.pem")["samples"] == 30
    finally:
        daemon.stop()


# --- SIGHUP reload ----------------------------------------------------------

def wait_for_log(daemon, text, count=1, timeout=30):
    """Waits until `text` is in the daemon's log `count` times."""
    deadline = time.monotonic() + timeout
    while daemon.log().count(text) < count:
        assert time.monotonic() < deadline, f"no '{text}' in {daemon.log()}"
        assert daemon.proc.poll() is None, daemon.log()
        time.sleep(0.02)


def test_reload_keeps_a_running_stream_alive(daemon, tmp_path):
    ids = tmp_path / "ids.txt"
    reference = cli_stream(daemon.address, "--seed", 5)
    # A slow consumer: 5 batches of 6, 300 ms each, one batch prefetched,
    # so the daemon still has batches to make after the reload.
    consumer = subprocess.Popen(
        [str(STOKER), "stream", "--address", daemon.address, "--dataset",
         "train", "--pipeline", "train", "--batch-size", "6", "--seed", "5",
         "--prefetch", "1", "--step-ms", "300", "--json", "--quiet",
         "--indices-out", str(ids)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_log(daemon, "event=stream_open", count=2)
        # Replace the catalog: the stream's pipeline is gone, another added.
        # A listener change is not applied, and the log says so.
        config = daemon.config
        config.write_text(config.read_text().replace(
            "  train:\n    - decode", "  other:\n    - decode").replace(
            "listen: {unix: ", "listen: {unix_mode: \"0600\", unix: "))
        daemon.signal(signal.SIGHUP)
        wait_for_log(daemon, "event=reloaded")
        # Still streaming after the reload.
        assert consumer.poll() is None
        assert daemon.log().count("event=stream_close") == 1
        out, err = consumer.communicate(timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    assert consumer.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["samples"] == 30
    assert result["content_digest"] == reference["content_digest"]
    assert sorted(int(i) for i in ids.read_text().split()) == list(range(30))
    assert "event=listen_unchanged" in daemon.log()
    assert stat.S_IMODE(os.stat(daemon.socket).st_mode) == 0o660
    # New streams see the new catalog.
    gone = cli_stream(daemon.address, check=False)
    assert gone.returncode == 1 and "NOT_FOUND" in gone.stderr
    out = run([STOKER, "stream", "--address", daemon.address, "--dataset",
               "train", "--pipeline", "other", "--batch-size", 6, "--json",
               "--quiet"])
    assert json.loads(out.stdout.strip().splitlines()[-1])["samples"] == 30


def test_bad_reload_is_refused_with_the_reason_and_the_old_config_stays(
        daemon):
    config = daemon.config
    good = config.read_text()
    config.write_text(good.replace(
        "datasets:\n", "datasets:\n  extra: {path: /nonexistent/stoker}\n"))
    daemon.signal(signal.SIGHUP)
    wait_for_log(daemon, "event=reload_refused")
    line = next(l for l in daemon.log().splitlines()
                if "event=reload_refused" in l)
    assert "/nonexistent/stoker" in line and "stoker.yaml:" in line
    assert cli_stream(daemon.address)["samples"] == 30
