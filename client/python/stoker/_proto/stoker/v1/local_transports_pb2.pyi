from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Optional as _Optional, Union as _Union

CUDA_HANDLE_LEGACY_IPC: CudaHandleKind
CUDA_HANDLE_UNSPECIFIED: CudaHandleKind
CUDA_HANDLE_VMM_POSIX_FD: CudaHandleKind
DESCRIPTOR: _descriptor.FileDescriptor
NOTICE_FRAME_MAX_BYTES: NoticeFrame
NOTICE_FRAME_UNSPECIFIED: NoticeFrame

class CudaIpcRing(_message.Message):
    __slots__ = ["fd_socket", "fell_back", "gpu_uuid", "handle_kind", "legacy_handle", "ring_bytes", "slot_bytes", "slots", "token"]
    FD_SOCKET_FIELD_NUMBER: _ClassVar[int]
    FELL_BACK_FIELD_NUMBER: _ClassVar[int]
    GPU_UUID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_KIND_FIELD_NUMBER: _ClassVar[int]
    LEGACY_HANDLE_FIELD_NUMBER: _ClassVar[int]
    RING_BYTES_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    SLOT_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    fd_socket: str
    fell_back: _containers.RepeatedScalarFieldContainer[str]
    gpu_uuid: str
    handle_kind: CudaHandleKind
    legacy_handle: bytes
    ring_bytes: int
    slot_bytes: int
    slots: int
    token: bytes
    def __init__(self, gpu_uuid: _Optional[str] = ..., handle_kind: _Optional[_Union[CudaHandleKind, str]] = ..., fd_socket: _Optional[str] = ..., token: _Optional[bytes] = ..., slots: _Optional[int] = ..., slot_bytes: _Optional[int] = ..., ring_bytes: _Optional[int] = ..., legacy_handle: _Optional[bytes] = ..., fell_back: _Optional[_Iterable[str]] = ...) -> None: ...

class NoticeSocket(_message.Message):
    __slots__ = ["path", "token"]
    PATH_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    path: str
    token: bytes
    def __init__(self, path: _Optional[str] = ..., token: _Optional[bytes] = ...) -> None: ...

class ShmRing(_message.Message):
    __slots__ = ["fd_socket", "slot_bytes", "slots", "token"]
    FD_SOCKET_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    SLOT_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    fd_socket: str
    slot_bytes: int
    slots: int
    token: bytes
    def __init__(self, fd_socket: _Optional[str] = ..., token: _Optional[bytes] = ..., slots: _Optional[int] = ..., slot_bytes: _Optional[int] = ...) -> None: ...

class CudaHandleKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class NoticeFrame(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
