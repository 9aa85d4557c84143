"""How many steps and samples a rank gets per epoch: the daemon's rules
(server/dataset/sampler.h), so a loader can answer len() before it opens a
stream.

A global step covers W*B entries of the epoch's permutation (W ranks, batch
size B); rank r takes the r-th block of B. After F = N // (W*B) full global
steps, R = N % (W*B) entries remain: with drop_last they are left out;
without it they form one more global step, where rank r takes
tail[r*C : min((r+1)*C, R)] with C = ceil(R/W). A rank whose chunk is empty
has one step fewer.
"""
from typing import Tuple


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
