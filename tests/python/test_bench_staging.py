"""bench/staging, the cold-node staging benchmark, runs end to end in
smoke mode: a tiny pack behind a fast link, every figure reported, the
staged epoch the same bytes as the local one, the link carrying the pack
about once."""
import json
import subprocess
import sys

from conftest import BUILD, ROOT


def test_smoke_run_reports_every_figure(tmp_path):
    out = subprocess.run(
        [sys.executable, ROOT / "bench" / "staging", "--smoke", "--build-dir",
         BUILD, "--data-dir", tmp_path / "data", "--out", tmp_path],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    [result] = list(tmp_path.glob("staging-*.json"))
    r = json.loads(result.read_text())
    assert r["smoke"] is True
    assert r["same_bytes"] is True
    assert r["time_to_first_batch_seconds"] > 0
    assert r["copy_seconds"] > 0 and r["copy_rate_vs_link"] > 0
    assert r["copy_alone_seconds"] > 0 and r["copy_alone_rate_vs_link"] > 0
    assert r["link_vs_epoch_bytes"] > 0 and r["requests"] > 0
    assert r["cpu_seconds_daemon_while_staging"] > 0
    assert r["epoch_while_staging_samples_per_second"] > 0
    # The records the epoch read by range while staging are kept for the
    # copy, which fetches only the rest: each byte crosses the link about
    # once (docs/storage.md, "Fetching each byte once").
    assert 1.0 <= r["bytes_fetched_vs_pack"] <= 1.1
    # The copy's bytes and the ranged reads' (the proxy also counts the
    # manifest).
    assert r["pack_bytes"] <= r["stage_bytes_metric"] <= r["bytes_fetched"]
    for figure in ("time to first batch", "epoch while staging vs local",
                   "full copy, nothing reading", "full copy, the epoch reading",
                   "link vs the local epoch's bytes/s",
                   "bytes fetched vs pack"):
        assert f"| {figure} |" in out.stdout, out.stdout
