"""What a stoker.torch.Loader's state_dict holds, and how a saved state
becomes a position of a Loader of another layout (stoker.torch's module
comment, "Resume")."""
import collections.abc
from typing import Any, Dict, Mapping, Optional, Tuple

from . import sampling
from .request import Position, StreamRequest, check_int

STATE_VERSION = 1
# Request fields that decide which samples a position holds, whatever the
# layout.
MUST_MATCH = ("dataset", "pipeline", "seed", "drop_last", "ra_reps")
# Fields of MUST_MATCH that a state saved before they existed lacks, with
# the value such a state had.
ADDED = {"ra_reps": 1}
# The layout: a resume may change it (stoker.torch, "Resume").
LAYOUT = ("world_size", "batch_size")


def state_dict(r: StreamRequest, position: Position,
               num_samples: Optional[int]) -> Dict[str, Any]:
    """The state of a Loader of request `r` at `position`."""
    state = {"version": STATE_VERSION,
             "position": {"epoch": position.epoch, "step": position.step},
             "rank": r.rank,
             "num_samples": num_samples,
             "global_batch": r.world_size * r.batch_size}
    state.update({k: getattr(r, k) for k in MUST_MATCH + LAYOUT})
    return state


def restore(state: Mapping[str, Any], r: StreamRequest
            ) -> Tuple[Position, Optional[int]]:
    """(the position of a Loader of request `r` that `state` resumes at,
    the dataset size the state was saved with). ValueError if the state is
    from another stream, or if its position has no exact equivalent in r's
    layout."""
    if (not isinstance(state, collections.abc.Mapping) or
            state.get("version") != STATE_VERSION):
        raise ValueError(f"not a stoker.torch.Loader state_dict of "
                         f"version {STATE_VERSION}: {state!r}")
    missing = [k for k in MUST_MATCH + LAYOUT + ("position",)
               if k not in state and k not in ADDED]
    if missing:
        raise ValueError(f"the state_dict lacks {', '.join(missing)}")
    saved_fields = {k: state.get(k, ADDED.get(k)) for k in MUST_MATCH}
    differ = [f"{k} {saved_fields[k]!r} in the state, {getattr(r, k)!r} "
              f"here" for k in MUST_MATCH
              if saved_fields[k] != getattr(r, k)]
    if differ:
        raise ValueError(
            "cannot resume: the state_dict is from a different stream ("
            + "; ".join(differ) + "). A Loader resumes only the stream it "
            "was saved from: same dataset, pipeline, seed, drop_last and "
            "ra_reps (world_size and batch_size may change).")
    world = check_int("the state's world_size", state["world_size"],
                      (1 << 32) - 1)
    batch = check_int("the state's batch_size", state["batch_size"],
                      (1 << 32) - 1)
    saved = state.get("global_batch", world * batch)
    if saved != world * batch or saved < 1:
        raise ValueError(
            f"the state_dict is inconsistent: global_batch {saved!r}, "
            f"world_size {world} x batch_size {batch}")
    position = state["position"]
    if isinstance(position, collections.abc.Mapping):
        position = (position.get("epoch"), position.get("step"))
    epoch, step = Position.of(position)
    here = r.world_size * r.batch_size
    resumed = sampling.resume_step(step, saved, here)
    if resumed is None:
        raise ValueError(_no_resume_step(r, epoch, step, world, batch))
    return Position(epoch, resumed), state.get("num_samples")


def _no_resume_step(r: StreamRequest, epoch: int, step: int, world: int,
                    batch: int) -> str:
    """Why a state saved at (epoch, step) with `world` ranks of `batch`
    cannot resume a Loader of request `r`, and what to do."""
    saved, here = world * batch, r.world_size * r.batch_size
    keep = (f", e.g. batch_size {saved // r.world_size} with world_size "
            f"{r.world_size}" if saved % r.world_size == 0 else "")
    return (
        f"cannot resume epoch {epoch} at step {step} with a global batch "
        f"of {here} (world_size {r.world_size} x batch_size "
        f"{r.batch_size}): the state was saved with a global batch of "
        f"{saved} (world_size {world} x batch_size {batch}), so the rest "
        f"of the epoch begins at entry {step * saved} of the epoch's "
        f"order, and no step of {here} begins there (steps of {here} "
        f"begin at its multiples); every position here would repeat or "
        f"skip samples. Keep the global batch (world_size x batch_size "
        f"= {saved}{keep}), or resume from a state saved at the start of "
        f"an epoch or at a step whose first entry is a multiple of "
        f"{here}, or call set_epoch({epoch + 1}) instead of "
        f"load_state_dict to skip the rest of epoch {epoch}.")
