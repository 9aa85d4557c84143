"""The pure figures of tests/gpu/bench_gpu.py (tested by
tests/python/test_gpu_bench_scripts.py), and its progress line."""
import math
import statistics
import sys
from typing import Dict, List

STEP_FACTOR = 1.3           # Fake step and sleeps: this x the daemon's rate.


def summary(values: List[float]) -> Dict[str, float]:
    """median, p90, mean, min, max and n of `values` (seconds or ms)."""
    if not values:
        raise ValueError("no samples")
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1,
                      math.ceil(0.9 * len(ordered)) - 1)]
    return {"median": statistics.median(ordered), "p90": p90,
            "mean": statistics.fmean(ordered), "min": ordered[0],
            "max": ordered[-1], "n": len(ordered)}


def steady_interval(stamps: List[float], skip: int) -> float:
    """Seconds per batch over stamps[skip:] (the times each batch was in
    hand): the batches before `skip` came from a full queue."""
    if len(stamps) - skip < 2:
        raise ValueError(f"need 2 stamps after the first {skip}, got "
                         f"{len(stamps)}")
    return (stamps[-1] - stamps[skip]) / (len(stamps) - 1 - skip)


def gb_per_s(nbytes: int, ms: float) -> float:
    """Decimal GB/s of `nbytes` moved in `ms` milliseconds."""
    return nbytes / (ms / 1000.0) / 1e9 if ms > 0 else float("inf")


def stall_percent(waits: List[float], wall: float) -> float:
    """The share of `wall` spent waiting for batches, in %."""
    return 100.0 * sum(waits) / wall if wall > 0 else 0.0


def choose_step_ms(per_batch_ms: float) -> float:
    """The fake step: STEP_FACTOR x the daemon's time per batch, so that it
    keeps up; at least 5 ms."""
    return max(5.0, STEP_FACTOR * per_batch_ms)


def batches_within(wanted: int, seconds_each: float, budget: float,
                   least: int = 5) -> int:
    """How many of `wanted` batches of `seconds_each` fit in `budget`
    seconds, but never fewer than `least`."""
    if seconds_each <= 0:
        return wanted
    return max(least, min(wanted, int(budget / seconds_each)))


def short(e: BaseException, limit: int = 240) -> str:
    """An exception as one line for the table: its type and the first line
    of its message, cut at `limit` characters."""
    text = f"{type(e).__name__}: {e}".splitlines()[0]
    return text if len(text) <= limit else text[:limit - 3] + "..."


def say(message: str) -> None:
    print(f"bench_gpu: {message}", file=sys.stderr, flush=True)
