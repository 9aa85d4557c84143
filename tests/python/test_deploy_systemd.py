"""deploy/systemd: the unit passes `systemd-analyze verify` and a hardening
threshold, install.sh stages what it promises, and stokerd speaks the
sd_notify protocol (READY, STATUS, WATCHDOG, RELOADING, STOPPING) to the
NOTIFY_SOCKET a service manager gives it."""
import os
import shutil
import signal
import socket as socketlib
import subprocess
import time

import pytest

from conftest import ROOT, STOKERD, BUILD, run, write_config

UNIT = ROOT / "deploy" / "systemd" / "stokerd.service"
INSTALL = ROOT / "deploy" / "systemd" / "install.sh"


def analyze():
    exe = shutil.which("systemd-analyze")
    assert exe, "systemd-analyze is missing: .ci/install-deps installs systemd"
    return exe


def unit_settings(text):
    """The unit's `Key=value` lines as {key: [values]}."""
    settings = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "[")):
            continue
        key, _, value = line.partition("=")
        settings.setdefault(key, []).append(value)
    return settings


def unit_with_exec(tmp_path, exe):
    """The unit with ExecStart pointing at `exe` (verify checks it exists)."""
    text = UNIT.read_text()
    assert "ExecStart=/usr/local/bin/stokerd " in text
    unit = tmp_path / "stokerd.service"
    unit.write_text(text.replace("ExecStart=/usr/local/bin/stokerd ",
                                 f"ExecStart={exe} "))
    return unit


def test_unit_passes_systemd_analyze_verify(tmp_path):
    unit = unit_with_exec(tmp_path, STOKERD)
    out = run([analyze(), "verify", unit], check=False)
    # verify exits 0 on settings it ignores, so its warnings count too.
    assert out.returncode == 0 and out.stderr.strip() == "", out.stderr


def test_verify_catches_a_broken_unit(tmp_path):
    # The check above can fail: a misspelt value is reported.
    unit = unit_with_exec(tmp_path, STOKERD)
    unit.write_text(unit.read_text().replace("ProtectSystem=strict",
                                             "ProtectSystem=strictly"))
    out = run([analyze(), "verify", unit], check=False)
    assert "ProtectSystem" in out.stderr or "protect system" in out.stderr


def test_unit_is_a_hardened_notify_service():
    s = unit_settings(UNIT.read_text())
    assert s["Type"] == ["notify"]
    assert s["Restart"] == ["on-failure"]
    assert s["User"] == ["stoker"] and s["Group"] == ["stoker"]
    assert s["RuntimeDirectory"] == ["stoker"]
    assert s["ProtectSystem"] == ["strict"]
    assert s["NoNewPrivileges"] == ["yes"]
    assert s["CapabilityBoundingSet"] == [""]
    assert s["AmbientCapabilities"] == [""]
    assert s["RestrictAddressFamilies"] == ["AF_UNIX AF_INET AF_INET6"]
    assert "@system-service" in s["SystemCallFilter"]
    for key in ("ProtectHome", "PrivateTmp", "PrivateDevices",
                "MemoryDenyWriteExecute", "LockPersonality",
                "RestrictNamespaces", "RestrictSUIDSGID"):
        assert s[key] == ["yes"], key
    assert "WatchdogSec" in s and "ExecReload" in s
    # The sample config puts the socket in the RuntimeDirectory.
    sample = (ROOT / "config" / "stokerd.yaml").read_text()
    assert "unix: /run/stoker/stoker.sock" in sample


def test_unit_exposure_is_low(tmp_path):
    # systemd's own score of the sandbox: 0 (locked down) to 10 (none).
    # --threshold is in tenths: fail above 2.0 ("OK").
    unit = unit_with_exec(tmp_path, STOKERD)
    out = run([analyze(), "security", "--offline=true", "--threshold=20",
               unit], check=False)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr


def test_install_script_stages_binaries_unit_and_config(tmp_path):
    root = tmp_path / "root"
    out = run([INSTALL, "--root", root, "--build-dir", BUILD,
               "--prefix", "/opt/stoker"])
    assert "systemctl not run" in out.stdout
    for exe in ("stokerd", "stoker"):
        path = root / "opt" / "stoker" / "bin" / exe
        assert os.access(path, os.X_OK), path
    unit = root / "etc" / "systemd" / "system" / "stokerd.service"
    assert ("ExecStart=/opt/stoker/bin/stokerd --config "
            "/etc/stoker/stokerd.yaml") in unit.read_text()
    config = root / "etc" / "stoker" / "stokerd.yaml"
    assert config.read_text() == (ROOT / "config" /
                                  "stokerd.yaml").read_text()
    # The installed stokerd finds the presets beside it.
    presets = root / "opt" / "stoker" / "share" / "stoker" / "presets"
    assert sorted(p.name for p in presets.iterdir()) == sorted(
        p.name for p in (ROOT / "config" / "presets").iterdir())
    # The staged unit verifies, its ExecStart pointed at the staged binary.
    staged = tmp_path / "stokerd.service"
    staged.write_text(unit.read_text().replace(
        "ExecStart=/opt/", f"ExecStart={root}/opt/"))
    out = run([analyze(), "verify", staged], check=False)
    assert out.returncode == 0 and out.stderr.strip() == "", out.stderr
    # A second run keeps an edited config.
    config.write_text("# edited\n")
    out = run([INSTALL, "--root", root, "--build-dir", BUILD])
    assert "kept the existing" in out.stdout
    assert config.read_text() == "# edited\n"


def test_install_script_refuses_without_a_build(tmp_path):
    out = run([INSTALL, "--root", tmp_path / "root", "--build-dir",
               tmp_path / "nothing"], check=False)
    assert out.returncode == 1
    assert "stokerd is missing" in out.stderr


class NotifySocket:
    """The service manager's end: a unix datagram socket stokerd sends
    sd_notify messages to."""

    def __init__(self, path):
        self.path = path
        self.sock = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.messages = []  # (monotonic time, {key: value}) in order.

    def wait_for(self, predicate, timeout=30):
        """Receives until a message satisfies `predicate`; returns it."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no such message; got {self.messages}")
            self.sock.settimeout(left)
            data = self.sock.recv(65536).decode()
            fields = dict(line.split("=", 1) for line in data.splitlines()
                          if "=" in line)
            self.messages.append((time.monotonic(), fields))
            if predicate(fields):
                return fields

    def close(self):
        self.sock.close()


def can_connect(path):
    with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as s:
        try:
            s.connect(str(path))
            return True
        except OSError:
            return False


def test_daemon_speaks_sd_notify(dataset, tmp_path):
    socket = tmp_path / "stoker.sock"
    config = write_config(tmp_path / "stoker.yaml", dataset, socket)
    notify = NotifySocket(tmp_path / "notify.sock")
    env = dict(os.environ, NOTIFY_SOCKET=str(notify.path),
               WATCHDOG_USEC="600000")  # 0.6 s: a ping every 0.3 s.
    env.pop("WATCHDOG_PID", None)
    log = open(tmp_path / "stokerd.log", "w")
    proc = subprocess.Popen([str(STOKERD), "--config", str(config)],
                            stderr=log, env=env)
    try:
        ready = notify.wait_for(lambda m: m.get("READY") == "1")
        # READY=1 comes once the listener accepts, with a status line.
        assert can_connect(socket)
        assert ready["STATUS"] == "serving 1 datasets, 1 pipelines"
        ready_at = notify.messages[-1][0]

        # The watchdog is fed at half the timeout, and STATUS= is refreshed
        # from the daemon's counters.
        status = notify.wait_for(lambda m: "streams open" in m.get(
            "STATUS", "") or "stream open" in m.get("STATUS", ""))
        assert "0 streams open" in status["STATUS"]
        notify.wait_for(lambda m: m.get("WATCHDOG") == "1"
                        and notify.messages[-1][0] > ready_at + 0.7)
        pings = [t for t, m in notify.messages
                 if m.get("WATCHDOG") == "1" and t > ready_at]
        assert len(pings) >= 2
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        assert max(gaps) < 0.6, gaps  # Never late for the 0.6 s timeout.

        # Reload: RELOADING=1, then READY=1 again.
        proc.send_signal(signal.SIGHUP)
        reloading = notify.wait_for(lambda m: m.get("RELOADING") == "1")
        assert int(reloading["MONOTONIC_USEC"]) > 0
        ready = notify.wait_for(lambda m: m.get("READY") == "1")
        assert ready["STATUS"].startswith("reloaded; serving 1 datasets")

        # A refused reload still ends with READY=1, and says why.
        config.write_text(config.read_text() + "  broken:\n    - nope: {}\n")
        proc.send_signal(signal.SIGHUP)
        notify.wait_for(lambda m: m.get("RELOADING") == "1")
        ready = notify.wait_for(lambda m: m.get("READY") == "1")
        assert ready["STATUS"].startswith("reload refused")
        assert "nope" in ready["STATUS"]

        proc.send_signal(signal.SIGTERM)
        notify.wait_for(lambda m: m.get("STOPPING") == "1")
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
        notify.close()

