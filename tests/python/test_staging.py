"""stokerd staging datasets with a `source`: a real nginx (and s3rver) on
loopback behind the fault proxy of storage_servers.py; the staged copy
streams the same bytes as the local pack, an open during staging waits and
is told why, kill -9 then resume, two daemons on one path, the cache limit,
and errors that name the dataset, shard, URL and HTTP status."""
import json
import os
import shutil
import signal
import urllib.request

import pytest
import stoker

from conftest import STOKER, TRAIN_PIPELINE, Daemon, run, wait_for
from storage_servers import (ACCESS_KEY, SECRET_KEY, FaultProxy, Nginx,
                             S3rver, free_port)


@pytest.fixture
def served(tmp_path, dataset):
    """nginx serving `dataset` as d/train, behind a fault proxy."""
    root = tmp_path / "www"
    shutil.copytree(dataset, root / "d" / "train")
    server = Nginx(root, tmp_path / "nginx").start()
    proxy = FaultProxy(server.port).start()
    yield proxy, root
    proxy.stop()
    server.stop()


def without_indexes(folder):
    """Makes the pack in `folder` one packed before record indexes, which
    stokerd serves only once its copy is complete (with them it serves
    from the moment the indexes are local: test_serve_while_staging.py)."""
    manifest = json.loads((folder / "manifest.json").read_text())
    for shard in manifest["shards"]:
        shard.pop("index", None)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    for index in folder.glob("*.idx"):
        index.unlink()


def files(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file()}


def pack_bytes(folder):
    return sum(p.stat().st_size for p in folder.iterdir()
               if p.is_file() and p.name != "manifest.json")


def config_text(socket, port, datasets, extra):
    lines = "".join(f"  {n}: {entry}\n" for n, entry in datasets.items())
    return (f"listen: {{unix: {socket}}}\nworkers: 2\nmemory_budget: 256MiB\n"
            f"metrics: {{listen: 127.0.0.1:{port}}}\n{extra}"
            f"datasets:\n{lines}pipelines:\n{TRAIN_PIPELINE}")


def start(tmp_path, datasets, extra="", name="d"):
    """A stokerd with `datasets` ({name: yaml of its entry}) and the train
    pipeline, its metrics on a free port. It inherits this process's
    environment (the AWS variables a test sets)."""
    folder = tmp_path / name
    folder.mkdir(exist_ok=True)
    socket = folder / "stoker.sock"
    port = free_port()
    config = folder / "stoker.yaml"
    config.write_text(config_text(socket, port, datasets, extra))
    d = Daemon(config, socket)
    d.metrics_url = f"http://127.0.0.1:{port}/metrics"
    d.reconfigure = lambda datasets, extra="": config.write_text(
        config_text(socket, port, datasets, extra))
    return d.start()


def stream(d, dataset, check=True, timeout_s=60):
    """One epoch of `dataset`; its --json summary, or with check=False the
    finished process (for a stream that fails)."""
    r = run([STOKER, "stream", "--address", d.address, "--dataset", dataset,
             "--pipeline", "train", "--batch-size", 4, "--epochs", 1,
             "--seed", 3, "--json", "--quiet", "--open-timeout", timeout_s],
            check=check)
    return json.loads(r.stdout) if check else r


def metric(d, name, dataset):
    """The value of `name` labelled with `dataset` on d's /metrics."""
    text = urllib.request.urlopen(d.metrics_url, timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(name + "{") and f'dataset="{dataset}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def stage_line(d, event):
    return [l for l in d.log().splitlines() if f"event={event}" in l]


def test_staged_dataset_streams_the_bytes_of_the_local_pack(tmp_path, served,
                                                             dataset):
    proxy, _ = served
    staged = tmp_path / "staged"
    d = start(tmp_path, {
        "train": f"{{path: {staged}, source: {proxy.url}/d/train}}",
        "local": f"{{path: {dataset}}}"})
    try:
        got = stream(d, "train")
        want = stream(d, "local")
        assert got["status"] == "OK" and got["samples"] == 30
        assert got["content_digest"] == want["content_digest"]
        assert files(staged) == files(dataset)
        assert stage_line(d, "stage_start") and stage_line(d, "stage_end")
        size = pack_bytes(dataset)
        assert metric(d, "stoker_stage_bytes_total", "train") == size
        assert metric(d, "stoker_stage_remaining_bytes", "train") == 0
        assert metric(d, "stoker_stage_shards_staged", "train") == 3
        # Bytes fetched: the pack once, and the manifest.
        assert sum(proxy.faults.served.values()) <= size * 1.1
        top = json.loads(run([STOKER, "top", "--once", "--json",
                              "--address", d.address, "--interval",
                              "0.2"]).stdout)
        row = [s for s in top["staging"] if s["dataset"] == "train"][0]
        assert row["state"] == "complete" and row["servable"]
        assert row["percent"] == 100
    finally:
        d.stop()


def test_an_open_during_staging_waits_and_is_told_why(tmp_path, served):
    proxy, root = served
    without_indexes(root / "d" / "train")
    proxy.faults.rate = 20000  # Bytes/s per answer: a copy of seconds.
    d = start(tmp_path, {
        "train": f"{{path: {tmp_path / 'staged'}, "
                 f"source: {proxy.url}/d/train}}"},
        extra="storage: {parallel: 2, chunk_size: 64KiB}\n")
    try:
        # An open whose wait is too short is told the progress.
        r = run([STOKER, "stream", "--address", d.address, "--dataset",
                 "train", "--pipeline", "train", "--batch-size", 4,
                 "--epochs", 1, "--open-timeout", 0.5, "--quiet"],
                check=False)
        assert r.returncode != 0
        assert "dataset 'train' is being staged onto local disk" in r.stderr
        assert "ETA" in r.stderr or "reading the manifest" in r.stderr
        top = run([STOKER, "top", "--once", "--address", d.address,
                   "--interval", "0.2"]).stdout
        assert "STAGING" in top and "train" in top
        [listed] = stoker.Client(d.address).datasets()
        assert listed.name == "train" and listed.staging
        assert listed.content_digest == ""
        # One that may wait long enough streams once the copy is in.
        got = stream(d, "train", True, 120)
        assert got["status"] == "OK" and got["samples"] == 30
        assert stage_line(d, "stage_end")
        [listed] = stoker.Client(d.address).datasets()
        assert listed.staging == "" and listed.num_samples == 30
    finally:
        d.stop()


def test_sighup_keeps_a_running_copy(tmp_path, served, dataset):
    proxy, _ = served
    proxy.faults.rate = 20000
    staged = tmp_path / "staged"
    entry = {"train": f"{{path: {staged}, source: {proxy.url}/d/train}}"}
    extra = "storage: {parallel: 1, chunk_size: 64KiB}\n"
    d = start(tmp_path, entry, extra)
    try:
        assert wait_for(lambda: (staged / "shard-00000.idx").exists(), 60)
        d.reconfigure({**entry, "local": f"{{path: {dataset}}}"}, extra)
        d.signal(signal.SIGHUP)
        assert stream(d, "local")["status"] == "OK"  # The reload is in.
        proxy.faults.rate = 0
        assert stream(d, "train", True, 120)["status"] == "OK"
        assert len(stage_line(d, "stage_start")) == 1
        assert not stage_line(d, "stage_stopped")
        assert "resuming:" not in d.log()
    finally:
        d.stop()


def test_kill_9_mid_copy_then_the_restarted_daemon_resumes(tmp_path, served):
    proxy, _ = served
    proxy.faults.rate = 30000
    staged = tmp_path / "staged"
    entry = {"train": f"{{path: {staged}, source: {proxy.url}/d/train}}"}
    extra = "storage: {parallel: 1, chunk_size: 64KiB}\n"
    d = start(tmp_path, entry, extra)
    try:
        assert wait_for(lambda: (staged / "shard-00000.lmdb").exists(), 120)
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(30)
    finally:
        d.stop()
    assert not (staged / "manifest.json").exists()
    first = proxy.faults.served.get("shard-00000.lmdb", 0)
    proxy.faults.rate = 0
    again = start(tmp_path, entry, extra, name="again")
    try:
        assert stream(again, "train")["status"] == "OK"
        assert "resuming:" in again.log()
        assert proxy.faults.served["shard-00000.lmdb"] == first
    finally:
        again.stop()


def test_sigterm_mid_chunk_stops_at_once_and_the_copy_resumes(tmp_path,
                                                               served):
    proxy, _ = served
    proxy.faults.rate = 2000  # A 64 KiB chunk would take half a minute.
    staged = tmp_path / "staged"
    entry = {"train": f"{{path: {staged}, source: {proxy.url}/d/train}}"}
    extra = "storage: {parallel: 1, chunk_size: 64KiB}\n"
    d = start(tmp_path, entry, extra)
    try:
        # The indexes are in: a shard's first chunk is on the way.
        assert wait_for(lambda: (staged / "shard-00002.idx").exists(), 60)
        d.signal(signal.SIGTERM)
        d.wait(timeout=10)  # Not the chunk's half minute.
    finally:
        d.stop()
    assert stage_line(d, "stage_stopped")
    proxy.faults.rate = 0
    again = start(tmp_path, entry, extra, name="again")
    try:
        assert stream(again, "train")["status"] == "OK"
    finally:
        again.stop()


def test_two_daemons_on_one_path_copy_it_once(tmp_path, served, dataset):
    proxy, _ = served
    proxy.faults.rate = 30000
    staged = tmp_path / "staged"
    entry = {"train": f"{{path: {staged}, source: {proxy.url}/d/train}}"}
    first = start(tmp_path, entry, name="first")
    second = None
    try:
        assert wait_for(lambda: (staged / ".stoker-pull" / "lock").exists(),
                        60)
        second = start(tmp_path, entry, name="second")
        assert wait_for(lambda: stage_line(second, "stage_waiting"), 60)
        assert f"another pull (pid {first.proc.pid})" in second.log()
        proxy.faults.rate = 0
        assert stream(second, "train", True, 120)["status"] == "OK"
        assert stream(first, "train")["status"] == "OK"
        # Every shard crossed the link once.
        for name in ("shard-00000.lmdb", "shard-00001.lmdb",
                     "shard-00002.lmdb"):
            assert proxy.faults.served[name] == (dataset / name).stat().st_size
    finally:
        if second is not None:
            second.stop()
        first.stop()


def test_the_cache_limit_evicts_the_least_recently_used_idle_copy(
        tmp_path, served, dataset):
    proxy, _ = served
    size = pack_bytes(dataset)
    src = f"{proxy.url}/d/train"
    extra = f"storage: {{cache_limit: {int(size * 1.5)}}}\n"
    a = {"a": f"{{path: {tmp_path / 'a'}, source: {src}}}",
         "local": f"{{path: {dataset}}}"}
    d = start(tmp_path, a, extra)
    try:
        assert stream(d, "a", True, 120)["status"] == "OK"
        # A reload adds b: a, idle, makes room for it.
        d.reconfigure({**a, "b": f"{{path: {tmp_path / 'b'}, source: {src}}}"},
                      extra)
        d.signal(signal.SIGHUP)
        assert stream(d, "b", True, 120)["status"] == "OK"
        assert not (tmp_path / "a").exists()
        assert any("dataset=a" in l for l in stage_line(d, "stage_evicted"))
        # A dataset without a source is never removed.
        assert stream(d, "local")["status"] == "OK"
        assert (dataset / "manifest.json").exists()
        # a is staged again when a stream asks for it, evicting b.
        assert stream(d, "a", True, 120)["status"] == "OK"
        assert not (tmp_path / "b").exists()
    finally:
        d.stop()


def test_a_dataset_over_the_cache_limit_fails_naming_the_sizes(tmp_path,
                                                               served):
    proxy, _ = served
    d = start(tmp_path, {
        "train": f"{{path: {tmp_path / 'staged'}, "
                 f"source: {proxy.url}/d/train}}"},
        extra="storage: {cache_limit: 1000}\n")
    try:
        r = stream(d, "train", False)
        assert r.returncode != 0
        assert "dataset 'train'" in r.stderr
        assert "storage.cache_limit is 0.0 MiB (1000 bytes)" in r.stderr
        assert metric(d, "stoker_stage_failed", "train") == 1
    finally:
        d.stop()


@pytest.mark.parametrize("fault,status", [("missing", "404"),
                                          ("corrupt", "data_loss")])
def test_a_failed_staging_names_dataset_shard_url_and_status(
        tmp_path, served, fault, status):
    proxy, root = served
    path = "d/train"
    if fault == "missing":
        path = "d/nothing"
    else:
        # Served only once copied, so the open sees the copy fail.
        without_indexes(root / "d" / "train")
        proxy.faults.corrupt["shard-00001.lmdb"] = 100
    d = start(tmp_path, {
        "train": f"{{path: {tmp_path / 'staged'}, source: {proxy.url}/{path}}}"})
    try:
        r = stream(d, "train", False)
        assert r.returncode != 0
        err = r.stderr
        assert f"staging dataset 'train' from {proxy.url}/{path}" in err
        if fault == "missing":
            assert f"{proxy.url}/{path}/manifest.json: HTTP 404" in err
        else:
            assert (f"shard shard-00001.lmdb from {proxy.url}/{path}/"
                    "shard-00001.lmdb: digest is") in err
        assert wait_for(lambda: stage_line(d, "stage_failed"), 30)
        assert f"status={status}" in stage_line(d, "stage_failed")[0]
        text = urllib.request.urlopen(d.metrics_url).read().decode()
        assert (f'stoker_stage_errors_total{{dataset="train",'
                f'status="{status}"}}') in text
    finally:
        d.stop()


def test_503s_are_retried_and_counted(tmp_path, served, dataset):
    proxy, _ = served
    proxy.faults.fail_next = 2
    proxy.faults.cut_next = 1
    d = start(tmp_path, {
        "train": f"{{path: {tmp_path / 'staged'}, "
                 f"source: {proxy.url}/d/train}}"})
    try:
        assert stream(d, "train", True, 120)["status"] == "OK"
        assert metric(d, "stoker_stage_retries_total", "train") == 3
        text = urllib.request.urlopen(d.metrics_url).read().decode()
        assert 'stoker_stage_errors_total{dataset="train",status="503"} 2' in text
    finally:
        d.stop()


@pytest.fixture
def s3(tmp_path, monkeypatch):
    server = S3rver(tmp_path / "s3").start()
    proxy = FaultProxy(server.port, secret=SECRET_KEY).start()
    for k in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    yield proxy
    proxy.stop()
    server.stop()


def test_staged_from_s3_with_signed_requests(tmp_path, s3, dataset,
                                             monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.url)
    run([STOKER, "push", dataset, "s3://data/packs/train"])
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    # The endpoint and region from the config, over the environment.
    extra = ("storage: {s3: {endpoint: \"" + s3.url +
             "\", region: us-east-1}}\n")
    d = start(tmp_path, {
        "train": f"{{path: {tmp_path / 'staged'}, "
                 "source: \"s3://data/packs/train\"}",
        "local": f"{{path: {dataset}}}"}, extra)
    try:
        got = stream(d, "train", True, 120)
        assert got["content_digest"] == stream(d, "local")["content_digest"]
    finally:
        d.stop()
    # A wrong secret: 403 named, the secret nowhere.
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
    bad = start(tmp_path, {
        "train": f"{{path: {tmp_path / 'staged2'}, "
                 "source: \"s3://data/packs/train\"}"}, extra, name="bad")
    try:
        r = stream(bad, "train", False)
        assert "HTTP 403" in r.stderr and "SignatureDoesNotMatch" in r.stderr
        assert f"{s3.url}/data/packs/train/manifest.json" in r.stderr
        text = urllib.request.urlopen(bad.metrics_url).read().decode()
        top = run([STOKER, "top", "--once", "--address", bad.address,
                   "--interval", "0.2"]).stdout
        for out in (r.stderr, bad.log(), text, top):
            assert "wrong-secret-value" not in out
    finally:
        bad.stop()
