"""The ways tests/gpu/bench_gpu.py gets batches onto the GPU (its modes),
and the DataLoader's dataset."""
import argparse
import os
from typing import Any, Dict, Iterator, Tuple

from gpu_figures import say
from gpu_report import DATALOADER_WORKERS, TITLES


# The DataLoader's dataset: ready tensors, no decode. Module level, so that
# spawned workers can unpickle it.

class ReadyImages:
    """`length` samples of (float32 image of `shape`, int64 label), taken
    from a pool of `pool` random images made in each worker on first use
    (what is pickled to a worker is three numbers)."""

    def __init__(self, length: int, shape: Tuple[int, ...],
                 pool: int = 32) -> None:
        self.length, self.shape, self.pool = length, shape, pool
        self._images: Any = None

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> Tuple[Any, Any]:
        import torch
        if self._images is None:
            g = torch.Generator().manual_seed(0)
            self._images = torch.rand((self.pool,) + self.shape, generator=g)
        return self._images[i % self.pool], torch.tensor(i % 1000)


# The modes. Each yields (image, label) pairs: next_host() gives the batch
# as the source hands it over, to_device() puts it on the GPU (queued).

class Mode:
    name = ""
    title = ""
    # Whether the batch may still be in flight to the GPU after to_device.
    needs_sync = True

    def __init__(self, args: argparse.Namespace, device: Any) -> None:
        self.args, self.device = args, device

    def open(self) -> None:
        raise NotImplementedError

    def next_host(self) -> Tuple[Any, Any]:
        raise NotImplementedError

    def to_device(self, pair: Tuple[Any, Any]) -> Tuple[Any, Any]:
        return pair

    def prefetch(self) -> int:
        """Batches the source may have ready ahead of the trainer."""
        raise NotImplementedError

    def describe(self) -> Dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


def endless(loader: Any) -> Iterator[Any]:
    """The Loader's batches across epochs (each `for` is one epoch)."""
    while True:
        got = False
        for batch in loader:
            got = True
            yield batch
        if not got:
            raise RuntimeError(
                "the Loader yielded no batch in an epoch: with drop_last the "
                "dataset needs at least one full batch of samples")


class LoaderMode(Mode):
    transport = ""
    on_gpu = True  # The Loader's device: the GPU, or the CPU.

    def open(self) -> None:
        from stoker.torch import Loader
        a = self.args
        self.loader = Loader(a.address, a.dataset, a.pipeline, a.batch_size,
                             seed=a.seed, drop_last=True,
                             transport=self.transport, prefetch=a.prefetch,
                             device=self.device if self.on_gpu else "cpu")
        self.batches = endless(self.loader)

    def next_host(self) -> Tuple[Any, Any]:
        b = next(self.batches)
        return b["image"], b["label"]

    def prefetch(self) -> int:
        s = self.loader.stream
        return s.info.prefetch if s is not None else 0

    def describe(self) -> Dict[str, Any]:
        loader = self.loader
        return {"transport": loader.transport,
                "transport_reason": loader.transport_reason,
                "pinned": loader.pinned, "prefetch": self.prefetch()}

    def close(self) -> None:
        self.loader.close()


class CudaIpcMode(LoaderMode):
    name = "cuda_ipc"
    title = TITLES[name]
    transport = "cuda_ipc"
    # The daemon announces a batch once it is complete on the device.
    needs_sync = False


class ShmPinnedMode(LoaderMode):
    name = "shm_pinned"
    title = TITLES[name]
    transport = "shm"


class ShmPageableMode(LoaderMode):
    name = "shm_pageable"
    title = TITLES[name]
    transport = "shm"
    on_gpu = False

    def to_device(self, pair: Tuple[Any, Any]) -> Tuple[Any, Any]:
        return pair[0].to(self.device), pair[1].to(self.device)


class DataLoaderMode(Mode):
    name = "dataloader"
    title = TITLES[name]

    def open(self) -> None:
        import torch.utils.data
        a = self.args
        # The batches in flight lie in /dev/shm until the pin thread takes
        # them.
        need = self.prefetch() * a.batch_size * 3 * a.size * a.size * 4
        if os.path.isdir("/dev/shm"):
            st = os.statvfs("/dev/shm")
            if st.f_bavail * st.f_frsize < need:
                say(f"dataloader: /dev/shm has "
                    f"{st.f_bavail * st.f_frsize / 1e9:.2f} GB free, the "
                    f"workers' batches may need {need / 1e9:.2f} GB: a bus "
                    f"error in a worker would be that")
        # Spawned workers: this process has gRPC threads and CUDA by now,
        # which a fork would copy half-done.
        self.dl: Any = torch.utils.data.DataLoader(
            ReadyImages(10 ** 8, (3, a.size, a.size)),  # type: ignore
            batch_size=a.batch_size, num_workers=DATALOADER_WORKERS,
            pin_memory=True, persistent_workers=True,
            multiprocessing_context="spawn")
        self.it = iter(self.dl)

    def next_host(self) -> Tuple[Any, Any]:
        image, label = next(self.it)
        return image, label

    def to_device(self, pair: Tuple[Any, Any]) -> Tuple[Any, Any]:
        return (pair[0].to(self.device, non_blocking=True),
                pair[1].to(self.device, non_blocking=True))

    def prefetch(self) -> int:
        return DATALOADER_WORKERS * 2  # prefetch_factor's default.

    def describe(self) -> Dict[str, Any]:
        st = os.statvfs("/dev/shm") if os.path.isdir("/dev/shm") else None
        return {"workers": DATALOADER_WORKERS, "start_method": "spawn",
                "pin_memory": True,
                "dev_shm_free_bytes": (st.f_bavail * st.f_frsize
                                       if st else None)}

    def close(self) -> None:
        del self.it, self.dl


MODE_CLASSES = {c.name: c for c in (CudaIpcMode, ShmPinnedMode,
                                    ShmPageableMode, DataLoaderMode)}
