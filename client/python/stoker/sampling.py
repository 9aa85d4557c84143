"""How many steps and samples a rank gets per epoch: the daemon's rules
(server/dataset/sampler.h), so a loader can answer len() before it opens a
stream.

A global step covers W*B entries of the epoch's permutation (W ranks, batch
size B); rank r takes the r-th block of B. After F = N // (W*B) full global
steps, R = N % (W*B) entries remain: with drop_last they are left out;
without it they form one more global step, where rank r takes
tail[r*C : min((r+1)*C, R)] with C = ceil(R/W). A rank whose chunk is empty
has one step fewer.

With repeated augmentation (ra_reps = k > 1) the epoch is the N*k entries
(p[j // k], copy j % k), and the rules above apply to them, except that a
rank takes the entries of a step strided: rank r takes entries r, r+W, ...
of each global step, the tail too (ceil((R - r) / W) of it, none when
r >= R). So entry j always goes to rank j % W, and the copies of a sample
land on different ranks, as torchvision's RASampler spreads them.

So global step s covers the entries [s*W*B, min((s+1)*W*B, N*k)) of the
epoch, the tail step too: only how a step's entries are split among the
ranks depends on W. A job that stopped before global step s has been given
exactly the entries before s*W*B, and any layout whose global steps begin
there delivers exactly the rest (resume_step).
"""
from typing import Optional, Tuple

MAX_RA_REPS = 64  # The daemon's bound (kMaxRaReps in sampler.h).


def _check(num_samples: int, batch_size: int, world_size: int,
           rank: int, ra_reps: int) -> None:
    if batch_size < 1 or world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"need batch_size >= 1 and 0 <= rank < world_size, "
                         f"got batch_size {batch_size}, rank {rank}, "
                         f"world_size {world_size}")
    if num_samples < 0:
        raise ValueError(f"num_samples {num_samples} is negative")
    if not 1 <= ra_reps <= MAX_RA_REPS:
        raise ValueError(f"ra_reps {ra_reps} is outside 1..{MAX_RA_REPS}")


def _tail(num_samples: int, batch_size: int, world_size: int, rank: int,
          drop_last: bool, ra_reps: int) -> Tuple[int, int]:
    entries = num_samples * ra_reps
    global_batch = world_size * batch_size
    full = entries // global_batch
    if drop_last:
        return full, 0
    rest = entries % global_batch
    if ra_reps > 1:  # Strided: entries rank, rank + W, ... of the tail.
        return full, max(0, -(-(rest - rank) // world_size))
    chunk = -(-rest // world_size)
    offset = full * global_batch + rank * chunk
    return full, max(0, min(chunk, entries - offset))


def steps_per_epoch(num_samples: int, batch_size: int, world_size: int = 1,
                    rank: int = 0, drop_last: bool = False,
                    ra_reps: int = 1) -> int:
    """Batches rank `rank` of `world_size` receives in one epoch."""
    _check(num_samples, batch_size, world_size, rank, ra_reps)
    full, tail = _tail(num_samples, batch_size, world_size, rank, drop_last,
                       ra_reps)
    return full + (1 if tail else 0)


def samples_per_epoch(num_samples: int, batch_size: int, world_size: int = 1,
                      rank: int = 0, drop_last: bool = False,
                      ra_reps: int = 1) -> int:
    """Samples (entries: each copy counts) rank `rank` of `world_size`
    receives in one epoch."""
    _check(num_samples, batch_size, world_size, rank, ra_reps)
    full, tail = _tail(num_samples, batch_size, world_size, rank, drop_last,
                       ra_reps)
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
