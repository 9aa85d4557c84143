"""Where a Loader runs: its rank in the job and its device."""
import os
from typing import Optional, Tuple, Union

import torch


def distributed_context(
        rank: Optional[int] = None, world_size: Optional[int] = None,
        job_id: Optional[str] = None) -> Tuple[int, int, str]:
    """(rank, world_size, job_id): the arguments given, else what
    torch.distributed or the torchrun environment says."""
    if rank is None or world_size is None:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            found_rank, found_world = dist.get_rank(), dist.get_world_size()
        else:
            found_rank = int(os.environ.get("RANK", "0"))
            found_world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = found_rank if rank is None else rank
        world_size = found_world if world_size is None else world_size
    if job_id is None:
        job_id = os.environ.get("TORCHELASTIC_RUN_ID", "")
    return rank, world_size, job_id


def resolve_device(
        device: Union[None, str, torch.device]) -> torch.device:
    """torch.device for `device`; 'cuda' without an index is the GPU of
    LOCAL_RANK, or the current one."""
    if device is None:
        return torch.device("cpu")
    device = torch.device(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device} was asked for, but "
                             f"torch.cuda.is_available() is False")
        if device.index is None:
            local = os.environ.get("LOCAL_RANK")
            index = int(local) if local else torch.cuda.current_device()
            device = torch.device("cuda", index)
    elif device.type != "cpu":
        raise ValueError(f"device {device} is not supported; use cpu or cuda")
    return device
