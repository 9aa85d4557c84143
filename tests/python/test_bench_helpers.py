"""bench/helpers, the helper-daemon benchmark, runs end to end in
smoke mode: the node alone, with one and with two helpers, and behind a
throttled link where this machine gives the bench a network namespace of
its own (else the report says why not), each delivering samples; the report
says what ran on which core and how many bytes a sample cost on the wire;
and its ratios are taken round by round."""
import importlib.machinery
import importlib.util
import json
import subprocess
import sys

from conftest import BUILD, ROOT


def load_bench():
    path = str(ROOT / "bench" / "helpers")  # A script without .py.
    loader = importlib.machinery.SourceFileLoader("bench_helpers", path)
    spec = importlib.util.spec_from_loader("bench_helpers", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_a_ratio_is_the_median_of_the_rounds_ratios():
    bench = load_bench()
    # Round 2 was disturbed (the node alone caught a quiet moment, the
    # helped stream a busy one): the ratio of the medians, 1900 / 1200, would
    # say 1.58x; the rounds' own ratios are 1.8, 1.36 and 1.8.
    alone = [{"samples_per_second": s} for s in (1000, 1400, 1200)]
    helped = [{"samples_per_second": s} for s in (1800, 1900, 2160)]
    ratios = bench.round_ratios(helped, alone)
    assert [round(r, 2) for r in ratios] == [1.8, 1.36, 1.8]
    assert bench.median(ratios) == ratios[0]
    assert bench.median([3.0, 1.0, 2.0]) == 2.0
    assert bench.median([1.0, 2.0]) == 2.0  # The upper middle, as rows.
    assert bench.median_row(helped) is helped[1]
    assert bench.median_row(alone) is alone[2]


def test_smoke_run_reports_every_configuration(tmp_path):
    out = subprocess.run(
        [sys.executable, ROOT / "bench" / "helpers", "--smoke", "--build-dir",
         BUILD, "--data-dir", tmp_path / "data", "--out", tmp_path],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    [result] = list(tmp_path.glob("helpers-*.json"))
    report = json.loads(result.read_text())
    assert report["smoke"] is True
    assert report["cores_available"] >= 1
    cores = report["cores"]

    configs = report["configurations"]
    assert set(configs) == {"alone", "helpers1", "helpers2"}
    for name, c in configs.items():
        assert c["samples"] > 0 and c["samples_per_second"] > 0, name
        assert c["ratio_vs_alone"] > 0, name
        pinned = c["pinned"]
        assert pinned["node"] == cores[0], name
        assert len(pinned["helpers"]) == c["helpers"], name
        # Never a scaling figure from daemons that shared a core.
        assert pinned["oversubscribed"] == (1 + c["helpers"] > len(cores))
        if pinned["oversubscribed"]:
            assert c["goal_met"] is None and c["scaling_vs_linear"] is None
        assert f"| {name} |" in out.stdout, out.stdout
    assert [configs[n]["goal"] for n in ("helpers1", "helpers2")] == [1.8, 2.7]
    # Smoke places chunks remote_first: the helpers build batches, and what
    # a sample cost on the wire is measured.
    helped = configs["helpers1"]
    assert helped["remote_batches"] > 0, helped
    assert helped["wire"]["bytes_per_sample"] > 0, helped["wire"]
    costs = helped["helper_costs"]
    assert costs["chunks"] > 0 and 0 <= costs["late_batches"] <= \
        helped["remote_batches"], costs

    throttled = report["throttled"]
    if throttled["measured"]:
        assert throttled["samples_per_second"] > 0
        assert throttled["link_bytes_per_sample"] > 0
    else:
        assert throttled["reason"], throttled
        assert "throttled link (1gbit): not measured" in out.stdout

    assert report["same_bytes"] is True
    assert report["wire_variants"]
    if report["wire_support"] == {"raw": True, "compress": True}:
        assert set(report["wire_variants"]) == {
            "float32", "raw uint8", "raw uint8 + zstd"}
    for name, v in report["wire_variants"].items():
        assert v["wire"]["bytes_per_sample"] > 0, name
