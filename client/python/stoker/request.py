"""What a stream asks stokerd for: a StreamRequest, and the Position to
start at.

StreamRequest is the one definition of a stream's request parameters:
their names, defaults and checks. Client.stream and stoker.torch.Loader
take each as a keyword of the same name and build the request from their
arguments with StreamRequest.from_arguments, so a field their signature
lacks fails every call, and the Loader hands its request to its streams
whole; tests/python/test_client_parameters.py pins the signatures.
OpenStream in stoker.proto carries each field under the same name.
"""
import dataclasses
import numbers
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, NamedTuple, cast

from ._proto.stoker.v1 import stoker_pb2 as pb
from .sampling import MAX_RA_REPS
from .transports import Transport

_UINT32 = (1 << 32) - 1
_UINT64 = (1 << 64) - 1


def check_int(name: str, value: object, top: int) -> int:
    """`value` as an int in [0, top]; ValueError naming `name` otherwise
    (a bool is not an int here)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an int, got {value!r}")
    number = int(value)
    if not 0 <= number <= top:
        raise ValueError(f"{name} {value} is outside [0, {top}]")
    return number


class Position(NamedTuple):
    """A stream position: the (epoch, step) of the next batch."""
    epoch: int
    step: int

    @classmethod
    def of(cls, value: object) -> "Position":
        """The Position of an (epoch, step) pair of ints >= 0; ValueError
        for anything else."""
        try:
            epoch, step = cast(Iterable[object], value)
        except (TypeError, ValueError):
            raise ValueError(f"start must be an (epoch, step) pair, got "
                             f"{value!r}") from None
        return cls(check_int("start epoch", epoch, _UINT64),
                   check_int("start step", step, _UINT64))


@dataclass(frozen=True)
class StreamRequest:
    """What a stream asks the daemon for, besides transport and start.
    Checked when made: ValueError names a field of the wrong type or out of
    its range."""
    dataset: str
    pipeline: str
    batch_size: int
    seed: int = 0
    epochs: int = 1
    rank: int = 0
    world_size: int = 1
    job_id: str = ""
    drop_last: bool = False
    ra_reps: int = 1
    prefetch: int = 0
    hold: int = 1
    share: bool = False
    weight: float = 1.0
    open_timeout: float = 30.0

    def __post_init__(self) -> None:
        for name in ("dataset", "pipeline", "job_id"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a str, got "
                                 f"{getattr(self, name)!r}")
        for name, top in (("batch_size", _UINT32), ("seed", _UINT64),
                          ("epochs", _UINT64), ("rank", _UINT32),
                          ("world_size", _UINT32), ("prefetch", _UINT32),
                          ("hold", _UINT32)):
            object.__setattr__(self, name,
                               check_int(name, getattr(self, name), top))
        object.__setattr__(self, "ra_reps",
                           check_int("ra_reps", self.ra_reps, _UINT32))
        if not 1 <= self.ra_reps <= MAX_RA_REPS:
            raise ValueError(f"ra_reps {self.ra_reps} is outside "
                             f"1..{MAX_RA_REPS}")
        for name in ("weight", "open_timeout"):
            value = getattr(self, name)
            if (isinstance(value, bool) or
                    not isinstance(value, (int, float)) or not value > 0):
                raise ValueError(f"{name} must be a number > 0, got "
                                 f"{value!r}")
            object.__setattr__(self, name, float(value))
        for name in ("drop_last", "share"):
            object.__setattr__(self, name, bool(getattr(self, name)))

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any],
                       **overrides: Any) -> "StreamRequest":
        """The request of a call whose parameters include every field:
        each field from `overrides`, else from `arguments` (the caller's
        locals()) by name."""
        values = {}
        for field in dataclasses.fields(cls):
            if field.name in overrides:
                values[field.name] = overrides[field.name]
            elif field.name in arguments:
                values[field.name] = arguments[field.name]
            else:
                raise TypeError(f"StreamRequest field '{field.name}' is not "
                                f"a parameter of the caller")
        return cls(**values)

    def to_proto(self, start: Position, transport: Transport,
                 copy_out: bool = False) -> pb.StreamRequest:
        """The open message at `start` over `transport`; `copy_out`: the
        consumer copies each batch out of its slot and releases it at once
        (OpenStream.copy_out; see Stream)."""
        request = pb.StreamRequest()
        o = request.open
        for field in dataclasses.fields(self):
            if field.name != "hold":  # Below: only where it means something.
                setattr(o, field.name, getattr(self, field.name))
        o.start.epoch, o.start.step = start
        transport.prepare(o)
        if transport.ack_on_release:
            o.hold = self.hold
            o.copy_out = copy_out
        return request
