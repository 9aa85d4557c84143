"""How many steps and samples a rank gets per epoch: the daemon's rules
(server/dataset/sampler.h), so a loader can answer len() before it opens a
stream.

A global step covers W*B entries of the epoch's permutation (W ranks, batch
size B); rank r takes the r-th block of B. After F = N // (W*B) full global
steps, R = N % (W*B) entries remain: with drop_last they are left out;
without it they form one more global step, where rank r takes
tail[r*C : min((r+1)*C, R)] with C = ceil(R/W). A rank whose chunk is empty
has one step fewer.

So global step s covers the entries [s*W*B, min((s+1)*W*B, N)) of the
permutation, the tail step too: only how a step's entries are split among
the ranks depends on W. A job that stopped before global step s has been
given exactly the entries before s*W*B, and any layout whose global steps
begin there delivers exactly the rest (resume_step).
"""
from typing import Optional, Tuple


def _check(num_samples: int, batch_size: int, world_size: int,
           rank: int) -> None:
    if batch_size < 1 or world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need batch_size >= 1 and 0 <= rank < world_size, "
                         f"got batch_size {batch_size}, rank {rank}, "
                         f"world_size {world_size}")
    if num_samples < 0:
        raise ValueError(f"num_samples {num_samples} is negative")


def _tail(num_samples: int, batch_size: int, world_size: int, rank: int,
          drop_last: bool) -> Tuple[int, int]:
    global_batch = world_size * batch_size
    full = num_samples // global_batch
    if drop_last:
        return full, 0
    rest = num_samples % global_batch
    chunk = -(-rest // world_size)
    offset = full * global_batch + rank * chunk
    return full, max(0, min(chunk, num_samples - offset))


def steps_per_epoch(num_samples: int, batch_size: int, world_size: int = 1,
                    rank: int = 0, drop_last: bool = False) -> int:
    """Batches rank `rank` of `world_size` receives in one epoch."""
    _check(num_samples, batch_size, world_size, rank)
    full, tail = _tail(num_samples, batch_size, world_size, rank, drop_last)
    return full + (1 if tail else 0)


def samples_per_epoch(num_samples: int, batch_size: int, world_size: int = 1,
                      rank: int = 0, drop_last: bool = False) -> int:
    """Samples rank `rank` of `world_size` receives in one epoch."""
    _check(num_samples, batch_size, world_size, rank)
    full, tail = _tail(num_samples, batch_size, world_size, rank, drop_last)
    return full * batch_size + tail


def resume_step(step: int, saved_global_batch: int,
                global_batch: int) -> Optional[int]:
    """The global step, for world_size * batch_size = `global_batch`, that
    begins where global step `step` begins for `saved_global_batch`: at
    entry step * saved_global_batch of the epoch's permutation. `step`
    itself when the global batches are equal; None when no step begins
    there (the entry is not a multiple of `global_batch`)."""
    if saved_global_batch < 1 or global_batch < 1 or step < 0:
        raise ValueError(f"need global batches >= 1 and step >= 0, got step "
                         f"{step}, global batches {saved_global_batch} and "
                         f"{global_batch}")
    begin = step * saved_global_batch
    if begin % global_batch:
        return None
    return begin // global_batch
