"""Stoker's Python client: batches from a stokerd on this node.

    import stoker
    client = stoker.Client("unix:/run/stoker/stoker.sock")
    with client.stream("train", "train", batch_size=64, epochs=1) as stream:
        for batch in stream:
            images, labels = batch["image"], batch["label"]  # numpy views

For PyTorch, ``stoker.torch.Loader`` yields dicts of tensors, is DDP-aware and
has ``state_dict()``. See client/python/README.md.
"""
from .batch import Batch, Ragged
from .client import Client
from .errors import (Aborted, AlreadyExists, Cancelled, DataLoss,
                     DeadlineExceeded, FailedPrecondition, Internal,
                     InvalidArgument, NotFound, OutOfRange, PermissionDenied,
                     ResourceExhausted, StokerError, Unauthenticated,
                     Unavailable, Unimplemented, Unknown)
from .info import DatasetInfo, PipelineInfo, StreamInfo, TensorSpec
from .request import Position, StreamRequest
from .stream import Stream

__version__ = "0.1.0"

__all__ = [
    "Aborted", "AlreadyExists", "Batch", "Cancelled", "Client", "DataLoss",
    "DatasetInfo", "DeadlineExceeded", "FailedPrecondition", "Internal",
    "InvalidArgument", "NotFound", "OutOfRange", "PermissionDenied",
    "PipelineInfo", "Position", "Ragged", "ResourceExhausted", "StokerError",
    "Stream",
    "StreamInfo", "StreamRequest", "TensorSpec", "Unauthenticated",
    "Unavailable", "Unimplemented", "Unknown",
]
