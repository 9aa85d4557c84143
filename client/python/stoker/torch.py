"""stoker.torch: a PyTorch loader that reads batches from stokerd.

    from stoker.torch import Loader
    loader = Loader(dataset="/data/imagenet/train", pipeline="imagenet_train",
                    batch_size=256, seed=0, device="cuda", drop_last=True)
    # or, from a daemon's config by name:
    loader = Loader("unix:/run/stoker/stoker.sock", "train", "train",
                    batch_size=256)
    for epoch in range(epochs):
        for batch in loader:              # one epoch per `for`
            train(batch["image"], batch["label"])

Without an address, a dataset folder (packed, or an ImageFolder packed on
first use) is served through a preset or a list of ops by a private stokerd
that this machine's trainers share; a name by the daemon at $STOKER_ADDRESS
or the node's (stoker._local, docs/loader.md).

Epochs. A Loader is a cursor over the stream's (epoch, step) positions.
``iter(loader)`` yields the batches from the cursor to the end of the
cursor's epoch, so each ``for batch in loader`` is one epoch, as with a
DataLoader, and the next ``for`` starts the next epoch. A loop left early
(``break``) leaves the cursor after the last batch it received: the next
``for`` yields the rest of that epoch, so no sample is skipped or repeated.
``set_epoch(e)`` moves the cursor to the start of epoch e (a no-op when the
cursor is already in epoch e, so a resumed epoch is finished first), like
DistributedSampler.set_epoch. `epochs` bounds the stream (None: no bound);
once the cursor is past it, iteration yields nothing.

Between epochs the Loader keeps its stream open, so the daemon prepares the
next epoch's first batches while the last ones of this epoch are used.

Resume. ``state_dict()`` is the cursor plus the request fields that decide
which samples a position holds (dataset, pipeline, seed, drop_last, ra_reps,
and the dataset's size) and the layout it was saved with (world_size,
batch_size and their product, the global batch); ``load_state_dict()``
refuses a state whose fields differ (ValueError naming them) and moves the
cursor. A state saved by rank 0 can be loaded by every rank of the job:
positions are global steps, and on a rank that has one step fewer in that
epoch the first ``for`` after loading yields nothing and moves the cursor to
the next epoch, so that its epochs stay in step with the other ranks'. The
daemon may have restarted in between: batches depend only on the request
and the position.

Resume on another number of ranks. Global step s covers the same entries
of the epoch's permutation whatever the world size, as long as the global
batch (world_size * batch_size) is the same; only how a step is split among
the ranks differs, the final partial step's too (see stoker.sampling). So a
state saved with world size W and batch size B loads into Loaders with W'
and B' where W' * B' = W * B at the same position, and the new ranks
together receive every remaining sample of the epoch exactly once. With
another global batch the position is converted where that is exact: where
the saved step begins at a sample at which a step of the new global batch
begins (always at the start of an epoch); with drop_last the samples left
out of that epoch are then the new layout's tail. Anywhere else
load_state_dict raises ValueError saying why and what to do. The resumed
run is a new job plan on the daemon: its job_id must differ from that of a
run whose streams are still open (torchrun gives each run with --standalone,
or with its own --rdzv_id, its own TORCHELASTIC_RUN_ID).

DDP. rank and world_size come from torch.distributed when it is
initialized, else from the RANK and WORLD_SIZE environment variables (as
torchrun sets them), else 0 and 1; job_id from TORCHELASTIC_RUN_ID; an
argument given wins. device="cuda" without an index means cuda:LOCAL_RANK
when LOCAL_RANK is set, else the current device. Without drop_last the last
step of an epoch may leave some ranks with one batch fewer; pass
drop_last=True with DDP so every rank takes the same number of steps.

Tensors. Over grpc on the CPU, each tensor is torch.from_numpy over the
received message (no copy); the message belongs to that batch alone, so
writing to the tensors in place is harmless. Over shm (what transport
'auto' picks for a daemon on a unix socket) the batch lies in a read-only
shared-memory slot that the daemon reuses once it is released, so by
default each tensor is copied out of the slot (one memcpy) and the slot is
released at once: tensors are then ordinary, writable and valid for as long
as you keep them, as with a DataLoader. The copies go into memory the
Loader recycles (``loader.output_pool``): a batch's tensors share one
block, which is written again only once every tensor of the batch and
every view of one (``t[0]``, ``t.view(...)``, ``t.numpy()``) is gone. A
trainer that drops each batch, as a training loop does, so cycles through
two blocks, already in memory, instead of faulting in a fresh one a batch
(9,400 page faults for 38.5 MB). The pool keeps at most ``hold + 2`` free
blocks; a trainer that keeps more batches gets fresh memory for them, and
once it lets them go the blocks beyond that are freed, and so is a free
block left unused while 16 batches were copied. ``close()`` frees
the pool's blocks. Such a Loader keeps no batch in the ring, so its stream
asks for one without hold slots (Stream's copy_out): ``prefetch`` slots. With ``zero_copy=True`` the CPU tensors are views of the slot instead (no
copy): they are read-only (writing to them in place crashes the process:
the mapping is read-only) and valid only until the Loader yields the next
batch or the loop ends, when the slot goes back to the daemon; ``.clone()``
what you keep longer.

With a CUDA device, transport 'auto' tries cuda_ipc first (for a daemon on
this node), then shm, then grpc; ``loader.transport`` says which it took
and ``loader.transport_reason`` why (also logged once, on the "stoker"
logger). Over cuda_ipc the daemon writes each batch into a ring on your
GPU and the tensors are views of it (no copy at all): like zero_copy they
are valid until the Loader yields the next batch or the loop ends (then
the slot goes back to the daemon: ``.clone()`` what you keep longer), and
writing to them in place writes the daemon's ring. Over shm the ring is
page-locked once (``loader.pinned``) and each tensor is copied from its
slot to the device with non_blocking=True on the current stream; where the
driver will not page-lock it (logged once), and over grpc, each tensor is
copied into pinned host memory first (synchronously; torch's pinned-memory
cache keeps that buffer until the copy to the device has run). A slot that
queued GPU work may still read goes back to the daemon only once that work
has run: the copies from a page-locked shm slot, or over cuda_ipc the work
queued on the current stream by the time the Loader is asked for the next
batch (the stream records a CUDA event at release and checks it before
reading on). So over cuda_ipc queue the work that reads a batch on the
current stream (or synchronize other streams) before asking for the next.

A Loader is used by one thread at a time.
"""
import dataclasses
import logging
import os
import warnings
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple, Union

import torch

from . import _local, _resume, sampling
from ._context import distributed_context, resolve_device
from ._pool import OutputPool
from ._tensors import TensorBatch, to_tensors
from .client import Client
from .errors import StokerError
from .request import Position, StreamRequest
from .stream import Stream
from .transports import candidates, on_device

_log = logging.getLogger("stoker")


class Loader:
    """Batches of a Stoker stream as dicts of torch tensors; see the module
    comment for epochs, resume, DDP and memory.

    Arguments are those of Client.stream (each request field of
    stoker.StreamRequest, and transport, start and reconnect_timeout), plus
    `device` and `zero_copy`. `address` may also be a stoker.Client, or
    None (the default) to attach to a daemon or start a private one (see
    the module comment); `dataset` may then be a folder and `pipeline` a
    preset or a list of ops. dataset, pipeline and batch_size are
    required.
    `epochs` is the number of epochs to serve (None or 0: no bound);
    `start` the first position. rank, world_size and job_id default to the
    distributed context. `hold` is as for Client.stream where the tensors
    view the ring (zero_copy, cuda_ipc) or are copied from it to a GPU;
    a Loader that copies batches out on the CPU keeps none in the ring,
    and `hold` bounds its output pool instead (hold + 2 free blocks);
    `zero_copy` (shm on the CPU only) yields views of the shm slot, valid
    until the next batch, instead of copies (see the module comment).
    `device` is where the tensors go (None: the CPU); transport 'cuda_ipc'
    needs a CUDA device.
    """

    # The output pool, made when first needed.
    _pool: Optional[OutputPool] = None

    def __init__(self, address: Union[None, str, Client] = None,
                 dataset: Union[None, str, "os.PathLike[str]"] = None,
                 pipeline: Union[None, str, _local.Ops] = None,
                 batch_size: Optional[int] = None, seed: int = 0,
                 epochs: Optional[int] = None, rank: Optional[int] = None,
                 world_size: Optional[int] = None,
                 job_id: Optional[str] = None, drop_last: bool = False,
                 transport: str = "auto", prefetch: int = 0,
                 start: Tuple[int, int] = (0, 0), ra_reps: int = 1,
                 reconnect_timeout: float = 30.0,
                 device: Union[None, str, torch.device] = None,
                 hold: int = 1, zero_copy: bool = False, share: bool = False,
                 weight: float = 1.0, open_timeout: float = 30.0) -> None:
        self._stream: Optional[Stream] = None  # For __del__ if checks fail.
        if dataset is None or pipeline is None or batch_size is None:
            raise TypeError("Loader() needs dataset, pipeline and batch_size")
        context = distributed_context(rank, world_size, job_id)
        # Checks the arguments now, as the stream would (dataset and
        # pipeline once resolved below); the streams get this request whole.
        request = StreamRequest.from_arguments(
            locals(), dataset="-", pipeline="-", epochs=epochs or 0,
            rank=context[0], world_size=context[1], job_id=context[2])
        self._zero_copy = bool(zero_copy)
        self._transport = transport
        self._device = resolve_device(device)
        if on_device(transport) and self._device.type != "cuda":
            raise ValueError(f"transport '{transport}' puts batches on a GPU: "
                             f"pass device='cuda', not {self._device}")
        given = address.address if isinstance(address, Client) else address
        # The name is checked now; which candidates suit is the stream's.
        candidates(transport, given or f"unix:{_local.NODE_SOCKET}",
                   self._cuda_device())
        self._position = Position.of(start)
        self._epochs = request.epochs or None
        self._reconnect_timeout = reconnect_timeout
        # Why the open stream has its transport; what was last logged.
        self._transport_reason: Optional[str] = None
        self._said: Optional[Tuple[str, str]] = None
        # Last: it may start a private stokerd, which is then left only to
        # a Loader that was built.
        target = _local.resolve(given, dataset, pipeline)
        self._request = dataclasses.replace(
            request, dataset=target.dataset, pipeline=target.pipeline)
        self._local = target.daemon
        self._client = address if isinstance(address, Client) else Client(
            target.address, connect_timeout=reconnect_timeout)
        # From the daemon, when first needed.
        self._num_samples: Optional[int] = None
        self._steps: Optional[int] = None
        # From load_state_dict, to check.
        self._saved_num_samples: Optional[int] = None
        self._generation = 0

    # What the loader is.

    @property
    def daemon(self) -> Optional[_local.PrivateDaemon]:
        """The private stokerd this Loader reads from (its pid, socket and
        log), or None for a daemon at an address."""
        return self._local

    @property
    def rank(self) -> int:
        return self._request.rank

    @property
    def world_size(self) -> int:
        return self._request.world_size

    @property
    def job_id(self) -> str:
        return self._request.job_id

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def position(self) -> Position:
        """The cursor: (epoch, step) of the next batch."""
        return self._position

    @property
    def epoch(self) -> int:
        return self._position.epoch

    @property
    def stream(self) -> Optional[Stream]:
        """The open stoker.Stream, or None between streams."""
        return self._stream

    @property
    def transport(self) -> Optional[str]:
        """The open stream's transport, or None between streams."""
        return self._stream.transport if self._stream is not None else None

    @property
    def transport_reason(self) -> Optional[str]:
        """Why the open stream has its transport: what was asked for, and
        for 'auto' what each candidate answered; None between streams."""
        return self._transport_reason if self._stream is not None else None

    @property
    def pinned(self) -> bool:
        """True when batches are copied to the GPU straight from the shm
        ring, which is page-locked (asynchronous copies, no staging)."""
        return self._stream is not None and self._stream.pinned

    @property
    def output_pool(self) -> OutputPool:
        """Where the copies out of shm slots go (see the module comment,
        "Tensors"): its `free_blocks` and `free_bytes` are what it holds
        now beyond the batches in use."""
        if self._pool is None:
            # The batch the trainer works on, the one being copied, and
            # `hold` more that it may keep: a block comes back to a pool
            # with room for it.
            self._pool = OutputPool(keep=max(1, self._request.hold) + 2)
        return self._pool

    def __len__(self) -> int:
        """Batches per epoch for this rank."""
        return self._steps_per_epoch()

    def set_epoch(self, epoch: int) -> None:
        """Moves the cursor to the start of `epoch`, unless it is already in
        that epoch."""
        if epoch != self._position.epoch:
            self._position = Position.of((epoch, 0))

    # Iteration.

    def __iter__(self) -> Iterator[TensorBatch]:
        self._generation += 1
        return self._naming_the_log(self._run_epoch(self._generation))

    def _naming_the_log(self, batches: Iterator[TensorBatch]
                        ) -> Iterator[TensorBatch]:
        """`batches`, with a private stokerd's log named in any StokerError
        they raise (the daemon's side of the failure is there)."""
        try:
            yield from batches
        except StokerError as e:
            if self._local is None:
                raise
            raise type(e)(f"{e.message} (the private stokerd's log: "
                          f"{self._local.log})", e.code) from e

    def _run_epoch(self, generation: int) -> Iterator[TensorBatch]:
        stream = self._stream_at_cursor()
        if stream is None:
            return
        epoch = self._position.epoch
        while self._position.epoch == epoch:
            if generation != self._generation:
                raise RuntimeError("this iteration of the Loader was "
                                   "superseded by a newer iter() or "
                                   "load_state_dict()")
            try:
                batch = next(stream)
            except StopIteration:
                self._close_stream()
                return
            self._position = stream.position
            try:
                yield to_tensors(batch, stream, self._device,
                                 self._zero_copy, self.output_pool)
            finally:
                # Over shm with zero_copy the tensors view the batch's
                # slot: it goes back to the daemon when the next batch is
                # asked for or the loop ends (else it is released already).
                batch.release()

    def _stream_at_cursor(self) -> Optional[Stream]:
        """The stream at the cursor, or None when this `for` has nothing
        to yield."""
        # A cursor past its epoch's last step (a rank with one step fewer
        # there, resumed from rank 0's state or on another layout) has
        # nothing left of that epoch: this `for` yields nothing and leaves
        # the cursor at the next epoch's start, so that the next `for` is
        # the next epoch, as on the other ranks. Only a cursor past step 0
        # needs the count first; otherwise the stream's header brings the
        # dataset's size, which saves the trainer a call before its first
        # batch.
        if self._position.step > 0:
            steps = self._steps_per_epoch()
            if 0 < steps <= self._position.step:
                self._position = Position(self._position.epoch + 1, 0)
                return None
        if self._epochs is not None and self._position.epoch >= self._epochs:
            self._close_stream()
            return None
        s = self._stream
        if s is not None and (s.closed or s.position != self._position):
            self._close_stream()
        if self._stream is None:
            if self._local is not None:
                # After close() the private daemon may have gone.
                self._local.ensure()
            self._stream = Stream(self._client, self._request,
                                  transport=self._transport,
                                  start=self._position,
                                  reconnect_timeout=self._reconnect_timeout,
                                  cuda_device=self._cuda_device(),
                                  copy_out=self._copies())
            self._say_transport(self._stream)
            if self._num_samples is None:
                self._num_samples = self._stream.info.num_samples
                try:
                    self._check_saved_size()
                except ValueError:
                    self._close_stream()
                    raise
            steps = self._steps_per_epoch()
            header_steps = self._stream.info.steps_per_epoch
            if header_steps != steps:
                r = self._request
                warnings.warn(
                    f"stokerd says rank {r.rank} of {r.world_size} has "
                    f"{header_steps} steps per epoch, the client computed "
                    f"{steps}; using the daemon's", RuntimeWarning)
                self._steps = header_steps
        return self._stream

    def _copies(self) -> bool:
        """Whether batches from an shm slot are copied out of it (into the
        output pool) and the slot released at once."""
        return not self._zero_copy and self._device.type == "cpu"

    def _cuda_device(self) -> Optional[int]:
        return self._device.index if self._device.type == "cuda" else None

    def _say_transport(self, stream: Stream) -> None:
        """Sets transport_reason, and logs it when it changed."""
        attempts = stream.transport_attempts
        if self._transport != "auto":
            reason = f"transport '{self._transport}' was asked for"
        else:
            reason = (f"transport 'auto' for device {self._device} tried "
                      f"{', '.join(name for name, _ in attempts)}: " +
                      "; ".join(f"{name} refused ({why})" if why else
                                f"{name} granted" for name, why in attempts))
        self._transport_reason = reason
        if self._said != (stream.transport, reason):
            self._said = (stream.transport, reason)
            _log.info("stoker.torch.Loader: transport %s (%s)",
                      stream.transport, reason)

    # The dataset's size, for len() and the tail rule.

    def _steps_per_epoch(self) -> int:
        if self._steps is None:
            r = self._request
            self._steps = sampling.steps_per_epoch(
                self._dataset_size(), r.batch_size, r.world_size, r.rank,
                r.drop_last, r.ra_reps)
        return self._steps

    def _dataset_size(self) -> int:
        if self._num_samples is None:
            self._num_samples = self._client.dataset(
                self._request.dataset).num_samples
        self._check_saved_size()
        return self._num_samples

    def _check_saved_size(self) -> None:
        saved = self._saved_num_samples
        if saved is not None and self._num_samples is not None:
            self._saved_num_samples = None
            if saved != self._num_samples:
                raise ValueError(
                    f"cannot resume: the state_dict was saved when dataset "
                    f"'{self._request.dataset}' had {saved} samples; it has "
                    f"{self._num_samples} now")

    # Resume.

    def state_dict(self) -> Dict[str, Any]:
        """The cursor, the request fields a resume must match, and the
        layout (world_size, batch_size, global_batch) it was saved with."""
        return _resume.state_dict(self._request, self._position,
                                  self._num_samples)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Moves the cursor to a saved position, converted to this Loader's
        layout (see the module comment); ValueError if the state is from
        another stream, or if its position has no exact equivalent here."""
        self._position, self._saved_num_samples = _resume.restore(
            state, self._request)
        self._check_saved_size()
        self._generation += 1

    # Closing.

    def _close_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

    def close(self) -> None:
        """Closes the stream, frees the output pool's free blocks and lets
        a private stokerd go once idle; the loader reopens a stream if
        iterated again."""
        self._close_stream()
        if self._pool is not None:
            self._pool.clear()
        if self._local is not None:
            self._local.release()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_stream", None) is not None:
            try:
                self._close_stream()
            except Exception:  # E.g. at interpreter exit.
                pass
        local = getattr(self, "_local", None)
        if local is not None:
            local.release()

    def __repr__(self) -> str:
        r = self._request
        return (f"stoker.torch.Loader({self._client.address!r}, "
                f"dataset={r.dataset!r}, pipeline={r.pipeline!r}, "
                f"batch_size={r.batch_size}, rank={r.rank}/{r.world_size}, "
                f"position={tuple(self._position)}, device={self._device})")
