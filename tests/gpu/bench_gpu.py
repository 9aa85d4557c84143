#!/usr/bin/env python3
"""The GPU benchmark table: what a trainer on a GPU pays for a
batch of 256 x 3x224x224 float32 (+ int64 labels) from stokerd, over each
way of getting it onto the GPU, against a DataLoader with pin_memory.

    PYTHONPATH=client/python python3 tests/gpu/bench_gpu.py \\
        --address unix:/tmp/stoker/stoker.sock --dataset bench \\
        --pipeline gpu224 --out "$OUT/bench-gpu.json"

Run from the repository root on a GPU machine against a running stokerd
(built with CUDA) whose PIPELINE outputs `image` float32 [3,224,224] and
`label` int64. PYTHONPATH must make `import stoker` work: client/python is
enough (the generated protobuf modules are inside the package, in
stoker/_proto); the script also appends the source tree's client/python to
sys.path, after whatever PYTHONPATH names. Needs torch with CUDA, grpcio,
protobuf and numpy; nothing else (no PIL, no torchvision).

Modes, each on its own stream, one after the other:
  cuda_ipc      Loader(device="cuda", transport="cuda_ipc"): the daemon's
                device ring; tensors are views of it.
  shm_pinned    Loader(device="cuda", transport="shm"): the shm ring
                page-locked (cudaHostRegister), copied with non_blocking.
  shm_pageable  Loader(device="cpu", transport="shm"), then .to("cuda").
  dataloader    torch DataLoader over ready float32 tensors in memory (no
                decode), batch_size as given, 4 workers (spawned),
                pin_memory=True, then .to("cuda", non_blocking=True).

Each mode: 2 warm-up batches; then the daemon's rate (batches read back to
back: the first prefetch+2 empty the queue, the interval over the rest is
the rate); then N timed batches with a sleep before each (1.3 x the rate,
after one long sleep that fills the queue), so that the batch is waiting
when asked for: the time from asking to having it usable on the GPU; then
N steps of a fake training step (a reduction over the batch, then a GPU
spin of fixed length, then a blocking event sync, as loss.item() would):
the trainer's wait for each batch over the loop's wall time is the stall
share, and time.process_time over the loop (every thread of this process:
the Loader's, the DataLoader's pin thread; not the DataLoader's worker
processes, nor the daemon) per step is the trainer CPU per batch. The
step's length is 1.3 x the daemon's rate over cuda_ipc (or --step-ms).

Prints a markdown table on stdout (every figure with what produced it) and
progress on stderr; --out writes every figure and sample as JSON. A mode
that raises is reported as "failed: <error>" and the run goes on; the exit
status is then 1. With --strict an unmet goal also exits 1.
"""
import argparse
import gc
import json
import os
import statistics
import sys
import time
import traceback
from typing import Any, Callable, Dict, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
_CLIENT = os.path.join(ROOT, "client", "python")
if _CLIENT not in sys.path:
    sys.path.append(_CLIENT)  # After PYTHONPATH: that one wins.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_report import MODES, markdown, rows_for  # noqa: E402
from gpu_figures import (STEP_FACTOR, batches_within,  # noqa: E402,F401
                         choose_step_ms, gb_per_s, say, short, stall_percent,
                         steady_interval, summary)
from gpu_modes import MODE_CLASSES, Mode  # noqa: E402

STOKER_MODES = MODES[:3]
WARMUP = 2
RATE_BATCHES = 8            # Batches timed for the rate, after the drain.


# Measurements.

class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        import torch
        self.torch = torch
        self.args = args
        if not torch.cuda.is_available():
            raise SystemExit("bench_gpu: torch.cuda.is_available() is False: "
                             "this needs a GPU")
        self.device = torch.device(args.device)
        if self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(self.device)
        self.pinned_h2d: Dict[int, Dict[str, Any]] = {}
        self.step_ms: Optional[float] = args.step_ms or None
        self.step_source = ("--step-ms" if args.step_ms else None)
        self.work: Optional[Callable[[], None]] = None
        self.work_info: Dict[str, Any] = {}

    def sync(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def environment(self) -> Dict[str, Any]:
        torch = self.torch
        p = torch.cuda.get_device_properties(self.device)
        return {"torch": torch.__version__, "cuda": torch.version.cuda,
                "gpu": p.name, "gpu_uuid": f"GPU-{p.uuid}",
                "device": str(self.device), "cpus": os.cpu_count(),
                "python": sys.version.split()[0]}

    def pinned_reference(self, nbytes: int) -> Dict[str, Any]:
        """A plain pinned H2D of `nbytes`: CUDA events around
        .to(device, non_blocking=True) of a pinned tensor (device time),
        and perf_counter around the same plus synchronize (wall)."""
        if nbytes in self.pinned_h2d:
            return self.pinned_h2d[nbytes]
        torch = self.torch
        src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
        src.fill_(1)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        events, walls = [], []
        for i in range(13):
            self.sync()
            t0 = time.perf_counter()
            start.record()
            dst = src.to(self.device, non_blocking=True)
            end.record()
            self.sync()
            t1 = time.perf_counter()
            if i >= 3:  # Warm-up: the caching allocator, the first copy.
                events.append(start.elapsed_time(end))
                walls.append((t1 - t0) * 1000.0)
            del dst
        ms = summary(events)
        result = {"bytes": nbytes, "event_ms": ms,
                  "wall_ms": summary(walls),
                  "gb_per_s": gb_per_s(nbytes, ms["median"])}
        self.pinned_h2d[nbytes] = result
        return result

    def make_work(self, step_ms: float) -> None:
        """The fake step's GPU work: torch.cuda._sleep calibrated to
        `step_ms` (else a matmul loop)."""
        torch = self.torch
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)

        def device_ms(fn: Callable[[], None]) -> float:
            self.sync()
            start.record()
            fn()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end))

        if hasattr(torch.cuda, "_sleep"):
            probe = 20_000_000
            per_ms = statistics.median(
                probe / device_ms(lambda: torch.cuda._sleep(probe))
                for _ in range(3))
            cycles = int(step_ms * per_ms)
            self.work = lambda: torch.cuda._sleep(cycles)
            how = f"torch.cuda._sleep({cycles}) ({per_ms:.0f} cycles/ms)"
        else:
            a = torch.randn(2048, 2048, device=self.device)
            one = statistics.median(device_ms(lambda: a @ a)
                                    for _ in range(3))
            reps = max(1, round(step_ms / one))

            def loop() -> None:
                for _ in range(reps):
                    a @ a
            self.work = loop
            how = f"{reps} matmuls of 2048x2048 float32 ({one:.2f} ms each)"
        measured = statistics.median(device_ms(self.work) for _ in range(3))
        # What the loop costs the CPU without any batch to get: the part
        # of each mode's trainer CPU that is the fake step's own.
        done = torch.cuda.Event(blocking=True)
        acc = torch.zeros((), device=self.device)
        x = torch.ones(16, device=self.device)
        cpu0 = time.process_time()
        for _ in range(5):
            acc += x.sum() + x.sum()
            self.work()
            done.record()
            done.synchronize()
        alone = (time.process_time() - cpu0) / 5 * 1000.0
        self.work_info = {"step_ms": step_ms, "work": how,
                          "device_ms": measured, "cpu_ms_alone": alone}
        say(f"fake step: {how}, {measured:.1f} ms on the device, "
            f"{alone:.3f} ms of CPU without a batch (asked {step_ms:.1f} ms,"
            f" from {self.step_source})")

    def run_mode(self, mode: Mode, budget: float) -> Dict[str, Any]:
        """Every figure of one mode (see the module comment); raises what
        the mode raised."""
        a, torch = self.args, self.torch
        r: Dict[str, Any] = {"mode": mode.name}
        t_open = time.perf_counter()
        mode.open()
        try:
            fetch = lambda: mode.to_device(mode.next_host())  # noqa: E731
            for _ in range(WARMUP):
                image, label = fetch()
                self.sync()
            r["first_batches_seconds"] = time.perf_counter() - t_open
            r.update(mode.describe())
            shape = list(image.shape)
            nbytes = (image.element_size() * image.nelement() +
                      label.element_size() * label.nelement())
            r.update(image_shape=shape, image_dtype=str(image.dtype),
                     label_dtype=str(label.dtype), batch_bytes=nbytes,
                     image_device=str(image.device))
            if image.device != self.device:
                raise RuntimeError(f"the batch is on {image.device}, not "
                                   f"{self.device}")
            del image, label

            # The rate: the queue emptied, then batches back to back.
            skip = mode.prefetch() + 2
            stamps = []
            for _ in range(skip + RATE_BATCHES):
                pair = fetch()
                self.sync()
                stamps.append(time.perf_counter())
            del pair
            per_batch = steady_interval(stamps, skip)
            r["rate"] = {"ms_per_batch": per_batch * 1000.0,
                         "samples_per_second": a.batch_size / per_batch,
                         "drained": skip, "timed": RATE_BATCHES}
            say(f"{mode.name}: {per_batch * 1000:.1f} ms per batch back to "
                f"back ({a.batch_size / per_batch:.0f} samples/s)")
            if self.step_ms is None:
                self.step_ms = choose_step_ms(per_batch * 1000.0)
                self.step_source = (f"{STEP_FACTOR} x {mode.name}'s "
                                    f"{per_batch * 1000:.1f} ms per batch")
            if self.work is None:
                self.make_work(self.step_ms)

            # Hand-over / H2D: the batch waiting when asked for.
            gap = STEP_FACTOR * per_batch
            n = batches_within(a.batches, gap, budget / 2)
            time.sleep((skip + 1) * per_batch + 0.05)  # Fills the queue.
            nexts, copies, totals = [], [], []
            for _ in range(n):
                time.sleep(gap)
                t0 = time.perf_counter()
                host = mode.next_host()
                t1 = time.perf_counter()
                pair = mode.to_device(host)
                if mode.needs_sync:
                    self.sync()
                t2 = time.perf_counter()
                nexts.append((t1 - t0) * 1000.0)
                copies.append((t2 - t1) * 1000.0)
                totals.append((t2 - t0) * 1000.0)
                del host, pair
            r["handover"] = {"gap_ms": gap * 1000.0, "synchronized":
                             mode.needs_sync, "total_ms": summary(totals),
                             "next_ms": summary(nexts),
                             "to_device_ms": summary(copies),
                             "samples_ms": totals}
            r["handover"]["gb_per_s"] = gb_per_s(
                nbytes, r["handover"]["total_ms"]["median"])

            # The fake training loop.
            assert self.work is not None and self.step_ms is not None
            n = batches_within(a.batches, self.step_ms / 1000.0, budget / 2)
            done = torch.cuda.Event(blocking=True)  # Sleeps, no spin.
            acc = torch.zeros((), device=self.device)
            waits = []
            for i in range(WARMUP + n):
                if i == WARMUP:
                    t_start, cpu0 = time.perf_counter(), time.process_time()
                t0 = time.perf_counter()
                image, label = fetch()
                t1 = time.perf_counter()
                acc += image.sum() + label.sum()  # The step reads the batch.
                self.work()
                done.record()
                done.synchronize()
                if i >= WARMUP:
                    waits.append(t1 - t0)
                del image, label
            wall = time.perf_counter() - t_start
            cpu = time.process_time() - cpu0
            r["stall"] = {
                "steps": n, "step_ms": self.step_ms,
                "wall_ms_per_step": wall / n * 1000.0,
                "wait_ms": summary([w * 1000.0 for w in waits]),
                "stall_percent": stall_percent(waits, wall),
                "keeps_up": per_batch * 1000.0 <= self.step_ms,
                "trainer_cpu_ms_per_batch": cpu / n * 1000.0,
                "checksum": float(acc.item())}
        finally:
            mode.close()
            gc.collect()
        return r


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]))
    p.add_argument("--address", required=True, help="unix:/path of stokerd")
    p.add_argument("--dataset", required=True)
    p.add_argument("--pipeline", required=True,
                   help="outputs image float32 [3,SIZE,SIZE] + label int64")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--batches", type=int, default=30,
                   help="timed batches per phase (fewer where the phase "
                        "would exceed its share of --time-budget)")
    p.add_argument("--size", type=int, default=224,
                   help="the image side: the DataLoader's images, and the "
                        "pinned H2D's bytes until a cuda_ipc batch gives "
                        "them")
    p.add_argument("--modes", default=",".join(MODES),
                   help=f"comma-separated, of {', '.join(MODES)}")
    p.add_argument("--device", default="cuda")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prefetch", type=int, default=0,
                   help="asked of the daemon (0: its default)")
    p.add_argument("--step-ms", type=float, default=0.0,
                   help="fake step length (default: 1.3 x the daemon's rate "
                        "over cuda_ipc)")
    p.add_argument("--time-budget", type=float, default=160.0,
                   help="seconds for the whole run; a mode that would start "
                        "past it is reported as not run")
    p.add_argument("--out", help="write every figure here as JSON")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when a goal is not met, too")
    a = p.parse_args()
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODE_CLASSES]
    if unknown:
        p.error(f"unknown modes {unknown}; use {', '.join(MODES)}")

    started = time.monotonic()
    bench = Bench(a)
    env = bench.environment()
    say(f"{env['gpu']} {env['gpu_uuid']}, torch {env['torch']} (CUDA "
        f"{env['cuda']}), {env['cpus']} CPUs")
    nominal = a.batch_size * (3 * a.size * a.size * 4 + 8)
    pinned: Dict[str, Any] = {}
    try:
        pinned["reference"] = bench.pinned_reference(nominal)
    except Exception as e:  # Reported as a failed row.
        traceback.print_exc()
        pinned["error"] = short(e)

    results: Dict[str, Dict[str, Any]] = {}
    errors: Dict[str, str] = {}
    for i, name in enumerate(modes):
        left = a.time_budget - (time.monotonic() - started)
        if left < 10:
            errors[name] = (f"not run: {a.time_budget:.0f} s time budget "
                            f"spent")
            say(f"{name}: {errors[name]}")
            continue
        say(f"{name}: starting ({left:.0f} s left)")
        try:
            r = bench.run_mode(MODE_CLASSES[name](a, bench.device),
                               left / (len(modes) - i) - 5)
        except Exception as e:
            traceback.print_exc()
            errors[name] = short(e)
            say(f"{name}: failed: {errors[name]}")
            continue
        results[name] = r
        if (name == "cuda_ipc" and r["batch_bytes"] != nominal and
                "reference" in pinned):
            # The table compares like with like: redo it for these bytes.
            pinned["reference"] = bench.pinned_reference(r["batch_bytes"])
        say(f"{name}: done")

    rows, unmet = rows_for(results, errors, pinned)
    rows.insert(0, {
        "measure": "fake training step",
        "result": (f"{bench.work_info['device_ms']:.1f} ms on the GPU, "
                   f"{bench.work_info['cpu_ms_alone']:.3f} ms CPU without "
                   f"a batch" if bench.work_info else
                   "not chosen (no mode ran)"),
        "goal": "",
        "how": (f"{bench.work_info['work']}, asked {bench.step_ms:.1f} ms: "
                f"{bench.step_source}; CUDA events (GPU), process_time over 5"
                f" steps on a static tensor (CPU)" if bench.work_info else
                "")})
    seconds = time.monotonic() - started
    print(f"GPU benchmark: {env['gpu']}, batch {a.batch_size}, "
          f"pipeline {a.pipeline} on dataset {a.dataset}, {seconds:.0f} s\n")
    print(markdown(rows))
    failed_modes = sorted(errors)
    print()
    if failed_modes:
        print(f"FAILED: {', '.join(failed_modes)}")
    if unmet:
        print(f"goals not met: {', '.join(unmet)}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"version": 1, "args": vars(a), "environment": env,
                       "seconds": seconds, "step": {
                           "ms": bench.step_ms, "source": bench.step_source,
                           **bench.work_info},
                       "pinned_h2d": pinned, "modes": results,
                       "errors": errors, "rows": rows, "unmet": unmet},
                      f, indent=1)
    if failed_modes or "error" in pinned:
        return 1
    return 1 if a.strict and unmet else 0


if __name__ == "__main__":
    sys.exit(main())
