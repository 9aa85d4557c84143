"""Observability end to end: stokerd's /metrics scraped by a real Prometheus,
linted by promtool; the alert rules checked and unit-tested by promtool; the
Grafana dashboard's queries against the metrics that exist; `stoker top
--once --json` against a live daemon.

Every process a test starts (stokerd, prometheus, stoker stream) is stopped
by its PID when the test ends. Prometheus runs on a free loopback port with
its own storage in the test's temp dir, so a system Prometheus (Debian's
package installs one) is neither used nor disturbed.
"""
import json
import re
import shutil
import socket as socketlib
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT, STOKER, Daemon, run, write_config

DEPLOY = ROOT / "deploy"
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
need_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool missing: apt-get install prometheus")


def free_port():
    with socketlib.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


@pytest.fixture
def metrics_daemon(dataset, tmp_path):
    """A stokerd serving /metrics on a free loopback port."""
    port = free_port()
    socket = tmp_path / "stoker.sock"
    d = Daemon(write_config(tmp_path / "stoker.yaml", dataset, socket,
                            f"metrics: {{listen: 127.0.0.1:{port}}}\n"),
               socket)
    d.metrics_url = f"http://127.0.0.1:{port}/metrics"
    d.metrics_port = port
    d.start()
    yield d
    d.stop()


def background_stream(daemon, *args):
    return subprocess.Popen(
        [str(STOKER), "stream", "--address", daemon.address, "--dataset",
         "train", "--pipeline", "train", "--epochs", "0", "--quiet",
         *[str(a) for a in args]],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def metric_names(exposition):
    return {line.split("{")[0].split(" ")[0]
            for line in exposition.splitlines()
            if line and not line.startswith("#")}


def test_prometheus_scrapes_a_rising_sample_rate(metrics_daemon, tmp_path):
    if PROMETHEUS is None:
        pytest.skip("prometheus missing: apt-get install prometheus")
    web = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: stoker\n"
        "    static_configs:\n"
        f"      - targets: ['127.0.0.1:{metrics_daemon.metrics_port}']\n")
    log = open(tmp_path / "prometheus.log", "w")
    prom = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{web}", "--log.level=warn"],
        stdout=log, stderr=subprocess.STDOUT)
    stream = background_stream(metrics_daemon, "--batch-size", 2,
                               "--step-ms", 5, "--job-id", "prom")
    query = urllib.parse.quote(
        'sum(rate(stoker_samples_total{job="stoker",job_id="prom"}[5s]))')
    rate = 0.0
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert prom.poll() is None, (tmp_path / "prometheus.log").read_text()
            try:
                reply = json.loads(get(
                    f"http://127.0.0.1:{web}/api/v1/query?query={query}"))
            except OSError:
                reply = {}  # Not listening yet.
            result = reply.get("data", {}).get("result", [])
            if result:
                rate = float(result[0]["value"][1])
                if rate > 0:
                    break
            time.sleep(0.5)
        up = json.loads(get(f"http://127.0.0.1:{web}/api/v1/query?query="
                            + urllib.parse.quote('up{job="stoker"}')))
    finally:
        stop(stream)
        stop(prom)
        log.close()
    assert rate > 0, "Prometheus never saw stoker_samples_total rise"
    assert up["data"]["result"][0]["value"][1] == "1"


@need_promtool
def test_promtool_accepts_the_exposition(metrics_daemon):
    run([STOKER, "stream", "--address", metrics_daemon.address, "--dataset",
         "train", "--pipeline", "train", "--batch-size", 4, "--job-id", "lint",
         "--quiet"])
    text = get(metrics_daemon.metrics_url)
    assert 'stoker_samples_total{dataset="train",pipeline="train",' \
           'job_id="lint",transport="grpc"} 30' in text
    lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text,
                          capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert lint.stdout.strip() == "" and lint.stderr.strip() == "", \
        lint.stdout + lint.stderr


@need_promtool
def test_promtool_checks_the_rules_and_the_scrape_config():
    rules = run([PROMTOOL, "check", "rules",
                 DEPLOY / "prometheus" / "alerts.yml"], check=False)
    assert rules.returncode == 0, rules.stdout + rules.stderr
    config = run([PROMTOOL, "check", "config",
                  DEPLOY / "prometheus" / "prometheus.yml"], check=False)
    assert config.returncode == 0, config.stdout + config.stderr


@need_promtool
def test_alerts_fire_as_their_unit_tests_expect():
    # Series in, alerts out: stall share, daemon down, corrupt samples,
    # budget nearly full (deploy/prometheus/alerts_test.yml).
    out = run([PROMTOOL, "test", "rules", "alerts_test.yml"], check=False,
              cwd=DEPLOY / "prometheus")
    assert out.returncode == 0, out.stdout + out.stderr


def test_dashboard_and_alerts_query_only_metrics_that_exist(metrics_daemon):
    run([STOKER, "stream", "--address", metrics_daemon.address, "--dataset",
         "train", "--pipeline", "train", "--batch-size", 4, "--quiet"])
    exposed = metric_names(get(metrics_daemon.metrics_url))
    recorded = set(re.findall(r"record:\s*(\S+)",
                              (DEPLOY / "prometheus" / "alerts.yml").read_text()))
    dashboard = json.loads((DEPLOY / "grafana" / "stoker.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 8
    alerts = (DEPLOY / "prometheus" / "alerts.yml").read_text()
    for text in exprs + [alerts]:
        for name in re.findall(r"\b(stoker(?:_[a-z]+)+|stoker:[a-z0-9_:]+)",
                               text):
            assert name in exposed or name in recorded, name


def test_top_once_json_finds_a_consumer_bound_stream(daemon):
    stream = background_stream(daemon, "--batch-size", 2, "--step-ms", 20,
                               "--job-id", "trainer")
    try:
        deadline = time.monotonic() + 60
        while True:
            out = run([STOKER, "top", "--address", daemon.address, "--once",
                       "--json", "--interval", 1])
            doc = json.loads(out.stdout)
            streams = [s for s in doc["streams"] if s["job_id"] == "trainer"]
            if streams and streams[0]["samples_per_second"] > 0:
                break
            assert time.monotonic() < deadline, doc
    finally:
        stop(stream)
    assert len(out.stdout.strip().splitlines()) == 1  # One document.
    assert doc["verdict"]["bottleneck"] == "consumer-bound", doc["verdict"]
    assert "training loop" in doc["verdict"]["change"]
    s = streams[0]
    assert s["dataset"] == "train" and s["pipeline"] == "train"
    assert s["transport"] == "grpc" and s["rank"] == 0
    assert s["stall_share"] is not None and s["stall_share"] < 0.1
    job = [j for j in doc["jobs"] if j["job_id"] == "trainer"][0]
    assert job["streams"] == 1
    assert set(job["stages"]) == {"read", "decode", "augment", "collate",
                                  "transfer"}
    assert doc["storage"][0]["dataset"] == "train"
    assert doc["storage"][0]["kind"] in ("local", "rotational")
    assert doc["workers"]["threads"] == 2
    assert doc["open_streams"] == 1


def test_top_without_a_daemon_says_so(tmp_path):
    out = run([STOKER, "top", "--address", f"unix:{tmp_path}/none.sock",
               "--once"], check=False)
    assert out.returncode == 1
    assert "cannot read stats" in out.stderr


def test_stream_open_and_close_are_logged_once_each(metrics_daemon):
    run([STOKER, "stream", "--address", metrics_daemon.address, "--dataset",
         "train", "--pipeline", "train", "--batch-size", 4, "--job-id", "logs",
         "--quiet"])
    metrics_daemon.stop()
    log = metrics_daemon.log()
    opens = [l for l in log.splitlines() if "event=stream_open" in l]
    closes = [l for l in log.splitlines() if "event=stream_close" in l]
    assert len(opens) == 1 and "job=logs" in opens[0], log
    assert len(closes) == 1 and "samples=30" in closes[0], log
    assert "event=metrics_listening" in log
    assert "event=dataset_storage" in log or "event=slow_storage" in log


def test_the_shm_socket_counts_a_connection_that_never_sends_its_token(
        metrics_daemon):
    """Transport::Counters reaches /metrics: a connection to the shm
    descriptor socket that sends nothing is dropped after the token wait
    (2 s) and counted."""
    def timed_out():
        for line in get(metrics_daemon.metrics_url).splitlines():
            if line.startswith("stoker_shm_socket_timed_out_total "):
                return float(line.split()[1])
        raise AssertionError("stoker_shm_socket_timed_out_total missing")

    before = timed_out()
    with socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_STREAM) as s:
        s.connect(f"{metrics_daemon.socket}.shm")
        deadline = time.monotonic() + 20
        while timed_out() == before:
            assert time.monotonic() < deadline, "never counted"
            time.sleep(0.1)
    assert timed_out() == before + 1
