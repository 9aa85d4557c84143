"""Exceptions: one class per gRPC status code, all under StokerError.

A failed call raises the class of its status code, carrying the daemon's
message unchanged, e.g. ``NotFound("NOT_FOUND: dataset 'nope' is not in the
config")``. Errors the client finds on its own use the same classes (a
daemon that does not come back raises Unavailable). Arguments that are wrong
before anything is sent (an unknown transport name, a negative batch size)
raise ValueError instead.
"""
from typing import Any, Dict, Optional, Type

import grpc


class StokerError(Exception):
    """A call to stokerd failed. ``code`` is the grpc.StatusCode, ``message``
    the daemon's (or the client's) text."""

    code: Any = grpc.StatusCode.UNKNOWN  # grpc ships no type information.

    def __init__(self, message: str, code: Optional[Any] = None) -> None:
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(f"{self.code.name}: {message}")


class Cancelled(StokerError):
    code = grpc.StatusCode.CANCELLED


class Unknown(StokerError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(StokerError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(StokerError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(StokerError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(StokerError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(StokerError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(StokerError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(StokerError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(StokerError):
    code = grpc.StatusCode.ABORTED


class OutOfRange(StokerError):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(StokerError):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(StokerError):
    code = grpc.StatusCode.INTERNAL


class Unavailable(StokerError):
    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(StokerError):
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(StokerError):
    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: Dict[Any, Type[StokerError]] = {cls.code: cls for cls in (
    Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound,
    AlreadyExists, PermissionDenied, ResourceExhausted, FailedPrecondition,
    Aborted, OutOfRange, Unimplemented, Internal, Unavailable, DataLoss,
    Unauthenticated)}


def from_code(code: Any, message: str) -> StokerError:
    """The exception for a grpc.StatusCode and a message."""
    return _BY_CODE.get(code, Unknown)(message, code=code)


def from_rpc_error(error: Exception) -> StokerError:
    """The exception for a grpc.RpcError raised by a call."""
    code = error.code() if hasattr(error, "code") else None
    details = error.details() if hasattr(error, "details") else None
    if code is None:
        code = grpc.StatusCode.UNKNOWN
    return from_code(code, details or str(error))


def from_stream_error(error: Exception) -> StokerError:
    """The exception for a grpc.RpcError that ended a Stream call the client
    did not cancel. CANCELLED can then only have come from the daemon: one
    that stops cancels the calls still open when its grace period ends, and
    the new ones that reach it on a connection it has not closed yet. That
    means the daemon is going away, which a reconnect rides out, so it is
    Unavailable (the C++ client does the same)."""
    e = from_rpc_error(error)
    if isinstance(e, Cancelled):
        return Unavailable(f"the daemon cancelled the call (it is stopping): "
                           f"{e.message}")
    return e
