"""A stream that opens on a dataset stokerd is still staging, and cannot
be served until the copy completes (a pack without record indexes): while
its open waits, the Python client logs the copy's progress on the
`stoker` logger and `stoker stream` prints it on stderr, before the first
batch."""
import json
import logging
import re
import subprocess

import stoker

from conftest import STOKER
from test_staging import served, start, without_indexes  # noqa: F401

STORAGE = "storage: {parallel: 1, chunk_size: 64KiB}\n"


def staging_slowly(tmp_path, proxy, root):
    """A stokerd staging `train`, packed without record indexes, over a
    link that makes the copy take about 10 s (168 KiB)."""
    without_indexes(root / "d" / "train")
    proxy.faults.link_rate = 16000  # Bytes/s for all answers together.
    return start(tmp_path, {"train": f"{{path: {tmp_path / 'staged'}, "
                                     f"source: {proxy.url}/d/train}}"},
                 STORAGE)


def test_python_client_logs_progress_while_its_open_waits(tmp_path, served,
                                                          caplog):
    proxy, root = served
    d = staging_slowly(tmp_path, proxy, root)
    try:
        caplog.set_level(logging.INFO, logger="stoker")
        client = stoker.Client(d.address)
        with client.stream("train", "train", batch_size=4, seed=3, epochs=1,
                           open_timeout=120) as s:
            before = [r for r in caplog.records if r.name == "stoker"]
            assert next(s).sample_ids
        records = [r for r in before
                   if "waiting for dataset 'train'" in r.getMessage()]
        lines = [r.getMessage() for r in records]
        # Once early in the wait, then every 5 s.
        assert len(lines) >= 2, [r.getMessage() for r in before]
        assert all(r.levelno == logging.INFO for r in records)
        assert all(b.created - a.created >= 4.5
                   for a, b in zip(records, records[1:])), lines
        assert f"stokerd at {d.address} is staging it onto local disk: " \
            in lines[0]
        # The daemon's line for the copy: percent, bytes, rate and ETA.
        assert re.search(r": \d+\.\d% \(.+ of .+\), .+/s, ETA ", lines[-1])
        assert not re.search(r": 0\.0% \(0 B of", lines[-1]), lines
    finally:
        d.stop()


def test_cli_prints_progress_while_its_open_waits(tmp_path, served):
    proxy, root = served
    d = staging_slowly(tmp_path, proxy, root)
    try:
        args = [STOKER, "stream", "--address", d.address, "--dataset",
                "train", "--pipeline", "train", "--batch-size", 4,
                "--epochs", 1, "--json", "--open-timeout", 120]
        # Both wait for the copy; the one with --quiet prints nothing.
        loud, quiet = (subprocess.Popen(
            [str(a) for a in args + extra], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True) for extra in ([], ["--quiet"]))
        out, err = loud.communicate(timeout=300)
        q_out, q_err = quiet.communicate(timeout=300)
        assert loud.returncode == 0, err
        assert json.loads(out)["samples"] == 30
        lines = [l for l in err.splitlines()
                 if "waiting for dataset 'train'" in l]
        assert lines, err
        assert lines[0].startswith(
            f"stoker stream: waiting for dataset 'train': stokerd at "
            f"{d.address} is staging it onto local disk: ")
        # Printed while the open waited: before any batch was counted.
        assert "batches" not in err[:err.index(lines[0])]
        assert quiet.returncode == 0 and q_err == "", q_err
        assert json.loads(q_out)["samples"] == 30
    finally:
        d.stop()
