"""The figures of tests/gpu/bench_gpu.py (its table: gpu_report.py) and
tests/gpu/kill9_check.py that need no GPU: statistics, the rate after a
drained queue, the stall share, the table and its goals, the Prometheus gauge and the polling that times
the kill -9 check. The scripts themselves run on a GPU machine
(tests/gpu/run.sh)."""
import importlib.util
import subprocess
import sys

import pytest

from conftest import ROOT

GPU = ROOT / "tests" / "gpu"


def load(name):
    spec = importlib.util.spec_from_file_location(name, GPU / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = load("bench_gpu")
report = load("gpu_report")
kill9 = load("kill9_check")


def test_summary_gives_median_p90_and_extremes():
    s = bench.summary([5.0, 1.0, 3.0, 2.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert s["median"] == 5.5
    assert s["p90"] == 9.0
    assert (s["min"], s["max"], s["n"]) == (1.0, 10.0, 10)
    assert s["mean"] == 5.5
    with pytest.raises(ValueError):
        bench.summary([])


def test_the_rate_leaves_out_the_batches_of_the_full_queue():
    # Four batches at once from the queue, then one every 0.1 s.
    stamps = [0.0, 0.001, 0.002, 0.003, 0.103, 0.203, 0.303]
    assert bench.steady_interval(stamps, 3) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        bench.steady_interval(stamps, 6)


def test_bandwidth_stall_and_step():
    assert bench.gb_per_s(154_140_672, 3.0) == pytest.approx(51.38, rel=1e-3)
    assert bench.stall_percent([0.01, 0.01], 1.0) == pytest.approx(2.0)
    assert bench.choose_step_ms(100.0) == pytest.approx(130.0)
    assert bench.choose_step_ms(1.0) == 5.0
    assert bench.batches_within(30, 0.1, 10.0) == 30
    assert bench.batches_within(30, 1.0, 10.0) == 10
    assert bench.batches_within(30, 10.0, 10.0) == 5


def figures(mode, cpu_ms, stall=0.2, keeps_up=True, pinned=True):
    handover = {"gap_ms": 130.0, "total_ms": bench.summary([0.5, 0.6]),
                "next_ms": bench.summary([0.4]),
                "to_device_ms": bench.summary([0.1]), "gb_per_s": 300.0}
    return {"mode": mode, "batch_bytes": 154_140_672, "pinned": pinned,
            "prefetch": 4,
            "rate": {"ms_per_batch": 100.0, "samples_per_second": 2560.0,
                     "drained": 6, "timed": 8},
            "handover": handover,
            "stall": {"steps": 30, "step_ms": 130.0,
                      "wall_ms_per_step": 131.0,
                      "wait_ms": bench.summary([0.3]),
                      "stall_percent": stall, "keeps_up": keeps_up,
                      "trainer_cpu_ms_per_batch": cpu_ms}}


def reference(ms):
    return {"reference": {"bytes": 154_140_672,
                          "event_ms": bench.summary([ms]),
                          "wall_ms": bench.summary([ms + 0.05]),
                          "gb_per_s": bench.gb_per_s(154_140_672, ms)}}


def test_rows_state_each_goal_and_what_missed_it():
    results = {"cuda_ipc": figures("cuda_ipc", 0.5),
               "shm_pinned": figures("shm_pinned", 2.0, stall=3.0),
               "shm_pageable": figures("shm_pageable", 30.0,
                                       keeps_up=False),
               "dataloader": figures("dataloader", 20.0)}
    rows, unmet = report.rows_for(results, {}, reference(0.5))
    by = {r["measure"]: r for r in rows}
    ratio = by["pinned H2D time / cuda_ipc hand-over time"]
    assert ratio["result"] == "0.91" and ratio["goal"].endswith(": met")
    assert "0.025 x the DataLoader's" in by[
        "trainer CPU per batch, cuda_ipc"]["result"]
    assert by["trainer CPU per batch, cuda_ipc"]["goal"].endswith(": met")
    # 2.0 / 20.0 = 0.1: over the goal.
    assert "NOT met" in by["trainer CPU per batch, shm + pinned ring"]["goal"]
    # The pageable path and the DataLoader are references: no goal.
    assert by["trainer CPU per batch, shm, pageable"]["goal"] == ""
    assert by["data stall share, shm, pageable"]["goal"] == "(reference)"
    assert by["data stall share, DataLoader pin_memory=True"]["goal"] == (
        "(reference)")
    assert "NOT met" in by["data stall share, shm + pinned ring"]["goal"]
    assert sorted(unmet) == ["CPU ratio shm_pinned", "stall shm_pinned"]


def test_no_stall_goal_where_the_source_is_slower_than_the_step():
    results = {"cuda_ipc": figures("cuda_ipc", 0.5, stall=9.0,
                                   keeps_up=False),
               "dataloader": figures("dataloader", 20.0)}
    rows, unmet = report.rows_for(results, {}, reference(0.5))
    by = {r["measure"]: r for r in rows}
    assert by["data stall share, cuda_ipc"]["goal"].startswith(
        "n/a (source gives 100.0 ms/batch")
    assert unmet == []


def test_modes_not_asked_for_have_no_rows():
    rows, _ = report.rows_for({"dataloader": figures("dataloader", 20.0)},
                             {}, reference(0.5))
    assert not [r for r in rows if "cuda_ipc" in r["measure"] or
                "shm" in r["measure"]]
    assert all(r["how"] for r in rows)
    table = report.markdown(rows)
    assert table.splitlines()[0].startswith("| measure | result |")
    assert len(table.splitlines()) == len(rows) + 2


def test_a_failed_mode_is_a_row_that_says_so_and_no_figure():
    results = {"dataloader": figures("dataloader", 20.0)}
    errors = {"cuda_ipc": "FailedPrecondition: no GPU",
              "shm_pinned": "RuntimeError: x", "shm_pageable": "y"}
    rows, unmet = report.rows_for(results, errors, {"error": "E: no pin"})
    by = {r["measure"]: r for r in rows}
    assert (by["cuda_ipc hand-over, notice to usable tensor"]["result"] ==
            "failed: FailedPrecondition: no GPU")
    assert by["pinned H2D of the same bytes"]["result"] == "failed: E: no pin"
    assert by["data stall share, shm, pageable"]["result"] == "failed: y"
    assert "pinned H2D time / cuda_ipc hand-over time" not in by
    assert unmet == []


def test_an_unpinned_ring_is_not_passed_off_as_the_pinned_path():
    results = {"shm_pinned": figures("shm_pinned", 0.5, pinned=False),
               "dataloader": figures("dataloader", 20.0)}
    rows, unmet = report.rows_for(results, {"cuda_ipc": "x",
                                           "shm_pageable": "y"},
                                 reference(0.5))
    by = {r["measure"]: r for r in rows}
    assert "NOT met" in by["shm + pinned ring, H2D"]["goal"]
    assert "shm ring not page-locked" in unmet


def test_the_gauge_is_read_per_gpu_whatever_the_uuid_spelling():
    text = """\
# HELP stoker_cuda_device_bytes Device memory cuda_ipc streams hold now.
# TYPE stoker_cuda_device_bytes gauge
stoker_cuda_device_bytes{gpu="GPU-AbC-1"} 1.6e+08
stoker_cuda_device_bytes{gpu="GPU-def-2"} 0
stoker_cuda_device_bytes_other{gpu="GPU-abc-1"} 7
stoker_cuda_batches_total 12
"""
    values = kill9.gauge_by_gpu(text)
    assert values == {"GPU-AbC-1": 1.6e8, "GPU-def-2": 0.0}
    assert kill9.gauge_for(values, "abc-1") == 1.6e8
    assert kill9.gauge_for(values, "GPU-DEF-2") == 0.0
    assert kill9.gauge_for(values, "GPU-none") == 0.0  # Not listed: 0.
    assert kill9.gauge_for(values, None) == 1.6e8


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_polling_times_the_first_reading_that_is_done():
    clock = FakeClock()
    readings = iter([900.0, 500.0, 70.0, 10.0])
    at, value, seen = kill9.wait_until(lambda: next(readings),
                                       lambda v: v <= 64, 5.0, 0.1,
                                       clock=clock, sleep=clock.sleep)
    assert at == pytest.approx(0.3) and value == 10.0
    assert [round(t, 3) for t, _ in seen] == [0.0, 0.1, 0.2, 0.3]


def test_polling_gives_up_at_the_deadline_with_the_last_reading():
    clock = FakeClock()
    at, value, seen = kill9.wait_until(lambda: 900.0, lambda v: v <= 64,
                                       1.0, 0.3, clock=clock,
                                       sleep=clock.sleep)
    assert at is None and value == 900.0
    assert seen[-1][0] == pytest.approx(1.0)
    assert len(seen) == 5  # 0, 0.3, 0.6, 0.9, 1.0


def child_saying(code):
    return kill9.Child([sys.executable, "-c", code], "hold")


def test_the_childs_ready_line_is_read_past_its_other_output():
    c = child_saying("import time; print('log'); "
                     "print('ready {\"pid\": 7}', flush=True); "
                     "time.sleep(60)")
    try:
        assert c.line("ready", 30) == {"pid": 7}
    finally:
        c.kill()
    assert c.proc.returncode == -9


def test_a_child_that_dies_or_says_nothing_is_an_error():
    c = child_saying("import sys; sys.exit(3)")
    with pytest.raises(RuntimeError, match="exited with status 3"):
        c.line("ready", 30)
    c = child_saying("import time; time.sleep(60)")
    try:
        with pytest.raises(RuntimeError, match="no 'ready' within"):
            c.line("ready", 0.3)
    finally:
        c.kill()
    assert c.proc.poll() is not None


def test_both_scripts_explain_themselves_without_a_gpu():
    for name in ("bench_gpu", "kill9_check"):
        out = subprocess.run([sys.executable, GPU / f"{name}.py", "--help"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "PYTHONPATH=client/python" in out.stdout
