"""The table of tests/gpu/bench_gpu.py: the GPU path's goals and the rows
they give, as pure functions of the figures a run measured (tested by
tests/python/test_gpu_bench_scripts.py without a GPU)."""
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

MODES = ("cuda_ipc", "shm_pinned", "shm_pageable", "dataloader")
TITLES = {"cuda_ipc": "cuda_ipc", "shm_pinned": "shm + pinned ring",
          "shm_pageable": "shm, pageable",
          "dataloader": "DataLoader pin_memory=True"}
DATALOADER_WORKERS = 4  # The reference DataLoader's, spawned.
# The GPU path's goals.
HANDOVER_RATIO_GOAL = 0.8   # pinned H2D time / hand-over time, at least.
CPU_RATIO_GOAL = 0.05       # trainer CPU per batch / DataLoader's, at most.
# The GPU paths, which the CPU and stall goals are for; the
# other two are references.
GOAL_MODES = ("cuda_ipc", "shm_pinned")
# Stall goal: 0 %. next() itself costs some 0.1 ms a step, so a stall under
# this share is counted as met (the figure printed is the one measured).
STALL_GOAL_PCT = 1.0


def verdict(met: Optional[bool], why: str = "") -> str:
    if met is None:
        return f"n/a ({why})" if why else "n/a"
    return "met" if met else "NOT met"


def markdown(rows: List[Dict[str, str]]) -> str:
    """The rows as a markdown table: measure, result, goal, how."""
    def cell(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")
    lines = ["| measure | result | goal | measured by |",
             "|---|---|---|---|"]
    lines += [f"| {cell(r['measure'])} | {cell(r['result'])} | "
              f"{cell(r.get('goal', ''))} | {cell(r.get('how', ''))} |"
              for r in rows]
    return "\n".join(lines)


def rows_for(results: Dict[str, Dict[str, Any]],
             errors: Dict[str, str], pinned: Dict[str, Any]
             ) -> Tuple[List[Dict[str, str]], List[str]]:
    """The table's rows and the goals not met, from the figures of the
    modes that ran (`results`) and the errors of those that failed; a mode
    in neither was not asked for and has no rows."""
    rows: List[Dict[str, str]] = []
    unmet: List[str] = []

    def add(measure: str, result: str, how: str, goal: str = "") -> None:
        rows.append({"measure": measure, "result": result, "goal": goal,
                     "how": how})

    def failed(mode: str) -> str:
        return f"failed: {errors[mode]}"

    def asked(mode: str) -> bool:
        return mode in results or mode in errors

    def ran(measure: Callable[[str], str]
            ) -> Iterator[Tuple[str, Dict[str, Any]]]:
        """(mode, figures) of each mode that ran, in MODES' order; a mode
        that was asked for and failed gets the row measure(title) that
        says why."""
        for mode in MODES:
            r = results.get(mode)
            if r is not None:
                yield mode, r
            elif asked(mode):
                add(measure(TITLES[mode]), failed(mode), "")

    ipc = results.get("cuda_ipc")
    if ipc is not None:
        add("daemon rate over cuda_ipc",
            f"{ipc['rate']['ms_per_batch']:.1f} ms/batch "
            f"({ipc['rate']['samples_per_second']:.0f} samples/s)",
            f"interval per batch over {ipc['rate']['timed']} batches read "
            f"back to back, after {ipc['rate']['drained']} that emptied the "
            f"prefetch queue")
        h = ipc["handover"]
        t = h["total_ms"]
        add("cuda_ipc hand-over, notice to usable tensor",
            f"median {t['median']:.3f} ms (p90 {t['p90']:.3f}, max "
            f"{t['max']:.3f}; n={t['n']})",
            f"perf_counter around next() of Loader(device='cuda', "
            f"transport='cuda_ipc') (prefetch {ipc.get('prefetch')}),"
            f" {h['gap_ms']:.0f} ms sleep before each so the batch waits; no "
            f"synchronize: the daemon announces a batch complete on the GPU")
    elif asked("cuda_ipc"):
        add("cuda_ipc hand-over, notice to usable tensor",
            failed("cuda_ipc"), "")
    ref = pinned.get("reference")
    if ref is not None:
        add(f"pinned H2D of the same {ref['bytes'] / 1e6:.1f} MB",
            f"{ref['event_ms']['median']:.3f} ms, {ref['gb_per_s']:.1f} GB/s"
            f" (wall with synchronize {ref['wall_ms']['median']:.3f} ms)",
            f"CUDA events around torch.empty(pin_memory=True).to('cuda', "
            f"non_blocking=True), median of {ref['event_ms']['n']} after 3 "
            f"warm-up copies")
    else:
        add("pinned H2D of the same bytes", f"failed: {pinned.get('error')}",
            "")
    if ipc is not None and ref is not None:
        ratio = ref["event_ms"]["median"] / ipc["handover"]["total_ms"][
            "median"]
        met = ratio >= HANDOVER_RATIO_GOAL
        if not met:
            unmet.append("hand-over ratio")
        add("pinned H2D time / cuda_ipc hand-over time", f"{ratio:.2f}",
            "the two medians above, same run", f">= {HANDOVER_RATIO_GOAL}: "
            f"{verdict(met)}")

    for mode, title, how in (
            ("shm_pinned", "shm + pinned ring, H2D",
             "perf_counter around next() of Loader(device='cuda', "
             "transport='shm') (copies queued non_blocking) + "
             "torch.cuda.synchronize()"),
            ("shm_pageable", "shm, pageable, H2D",
             "perf_counter around next() of Loader(device='cpu', "
             "transport='shm') (copied out of the slot), then .to('cuda') "
             "+ synchronize"),
            ("dataloader", "DataLoader pin_memory=True, in the trainer",
             f"perf_counter around next() of a DataLoader "
             f"({DATALOADER_WORKERS} spawned workers, ready float32 tensors, "
             f"no decode), then "
             f".to('cuda', non_blocking=True) + synchronize")):
        r = results.get(mode)
        if r is None:
            if asked(mode):
                add(title, failed(mode), how)
            continue
        h = r["handover"]
        extra = (f"; ring pinned: {r['pinned']}" if mode == "shm_pinned"
                 else "")
        add(title,
            f"median {h['total_ms']['median']:.2f} ms (next() "
            f"{h['next_ms']['median']:.2f} + to GPU/sync "
            f"{h['to_device_ms']['median']:.2f}), {h['gb_per_s']:.1f} GB/s; "
            f"n={h['total_ms']['n']}",
            f"{how}; {h['gap_ms']:.0f} ms sleep before each; GB/s = "
            f"{r['batch_bytes'] / 1e6:.1f} MB / median{extra}")
        if mode == "shm_pinned" and not r["pinned"]:
            unmet.append("shm ring not page-locked")
            rows[-1]["goal"] = ("ring page-locked: NOT met (the Loader "
                                "staged through pinned memory)")

    base = results.get("dataloader")
    base_cpu = (base["stall"]["trainer_cpu_ms_per_batch"] if base else None)
    for mode, r in ran(lambda title: f"trainer CPU per batch, {title}"):
        title = TITLES[mode]
        s = r["stall"]
        cpu = s["trainer_cpu_ms_per_batch"]
        result = f"{cpu:.2f} ms"
        goal = ""
        if mode != "dataloader":
            if base_cpu:
                ratio = cpu / base_cpu
                result += f" ({ratio:.3f} x the DataLoader's)"
                if mode in GOAL_MODES:
                    met = ratio <= CPU_RATIO_GOAL
                    goal = f"<= {CPU_RATIO_GOAL} x DataLoader: {verdict(met)}"
                    if not met:
                        unmet.append(f"CPU ratio {mode}")
            elif mode in GOAL_MODES:
                goal = verdict(None, "no DataLoader figure")
        add(f"trainer CPU per batch, {title}", result,
            f"time.process_time() of this process (all its threads; not "
            f"the DataLoader's worker processes, nor the daemon) over "
            f"{s['steps']} steps of the fake training loop / steps", goal)
    for mode, r in ran(lambda title: f"data stall share, {title}"):
        title = TITLES[mode]
        s = r["stall"]
        rate = r["rate"]["ms_per_batch"]
        if mode not in GOAL_MODES:
            goal = "(reference)"
        elif s["keeps_up"]:
            met = s["stall_percent"] < STALL_GOAL_PCT
            goal = f"0 % (< {STALL_GOAL_PCT} %): {verdict(met)}"
            if not met:
                unmet.append(f"stall {mode}")
        else:
            goal = verdict(None, f"source gives {rate:.1f} ms/batch, slower "
                                 f"than the {s['step_ms']:.1f} ms step")
        add(f"data stall share, {title}",
            f"{s['stall_percent']:.2f} % (wait median "
            f"{s['wait_ms']['median']:.3f} ms/step, "
            f"{s['wall_ms_per_step']:.1f} ms/step wall)",
            f"sum of the trainer's waits for the next batch (on the GPU) / "
            f"wall time, over {s['steps']} steps of {s['step_ms']:.1f} ms "
            f"(sum over the batch, GPU spin, blocking event sync); source "
            f"{rate:.1f} ms/batch back to back", goal)
    return rows, unmet
