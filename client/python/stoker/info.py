"""What stokerd says about its config (datasets, pipelines and their
outputs) and about a stream it opened: plain, frozen values."""
from dataclasses import dataclass
from typing import Tuple

import numpy as np

from ._proto.stoker.v1 import stoker_pb2 as pb
from .request import Position
from .transports import dtype_of


@dataclass(frozen=True)
class TensorSpec:
    """A per-sample output of a pipeline (shape without the batch dim; a
    ragged field's values have -1 first). `offsets_for` is set on a ragged
    field's "<name>.offsets" output, to <name>; `utf8` on a str field's."""
    name: str
    dtype: "np.dtype[np.generic]"
    shape: Tuple[int, ...]
    offsets_for: str = ""
    utf8: bool = False

    @classmethod
    def from_proto(cls, proto: pb.TensorSpec) -> "TensorSpec":
        return cls(proto.name, dtype_of(proto.dtype), tuple(proto.shape),
                   proto.offsets_for, proto.utf8)


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    num_samples: int
    num_shards: int
    bytes: int
    classes: Tuple[str, ...]
    fields: Tuple[str, ...]
    # Which pack this is: equal on two daemons only for the same dataset.
    manifest_digest: str
    # Which samples these are, from the daemon's records: equal on two
    # daemons only for the same samples; "" when they cannot prove it.
    content_digest: str = ""
    # While the daemon stages the dataset from its `source` and streams
    # cannot open on it yet: where the copy is (percent, bytes, rate, ETA)
    # or why it failed; "" once it is served.
    staging: str = ""


@dataclass(frozen=True)
class PipelineInfo:
    name: str
    ops: Tuple[str, ...]
    outputs: Tuple[TensorSpec, ...]


@dataclass(frozen=True)
class StreamInfo:
    """What the daemon said about a stream when it opened (this rank's
    steps and samples per epoch, the transport and prefetch granted)."""
    num_samples: int
    steps_per_epoch: int
    samples_per_epoch: int
    prefetch: int
    transport: str
    outputs: Tuple[TensorSpec, ...]
    start: Position
    shared: bool = False  # Joined a shared preprocessing run.
