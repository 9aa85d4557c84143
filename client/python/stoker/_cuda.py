"""CUDA for the client's transports, through torch and the driver library
(libcuda.so.1, called with ctypes: nothing is compiled).

- unavailable(): why this process cannot put batches on a GPU, or None.
- DeviceRing: a cuda_ipc ring (CudaIpcRing in local_transports.proto)
  mapped on one GPU, and its slots' tensors as torch tensors without a copy.
- HostRegistration: host memory (an shm ring) page-locked, so that copies
  from it to the GPU run asynchronously.
- fence(): a CUDA event on a GPU's current stream, which a release waits
  for before the daemon may reuse what the queued work reads.

torch is imported only when one of these is used, so the client works
without it. Every driver call runs with the device's primary context (the
one torch uses) pushed around it, so nothing here changes torch's current
device. Thread-safe.
"""
import contextlib
import ctypes
import os
import threading
import weakref
from typing import (TYPE_CHECKING, Any, Callable, Dict, Iterator, List,
                    Optional, Protocol, Tuple)

import numpy as np
import numpy.typing as npt

from . import errors
from ._proto.stoker.v1 import stoker_pb2 as pb

if TYPE_CHECKING:
    import torch

# Types and values of cuda.h (the same in CUDA 12 and 13). Enums are ints.
CUresult = ctypes.c_int
CUdevice = ctypes.c_int
CUcontext = ctypes.c_void_p
CUdeviceptr = ctypes.c_ulonglong
CUmemGenericAllocationHandle = ctypes.c_ulonglong


class CUmemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class CUmemAccessDesc(ctypes.Structure):
    _fields_ = [("location", CUmemLocation), ("flags", ctypes.c_int)]


class CUipcMemHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


CUDA_SUCCESS = 0
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
CU_MEMHOSTREGISTER_PORTABLE = 1
# An shm ring is mapped read-only; the driver pins such pages only with this.
CU_MEMHOSTREGISTER_READ_ONLY = 8

_P = ctypes.POINTER
# The entry points used, each by the symbol cuda.h maps its name to
# (cuIpcOpenMemHandle is cuIpcOpenMemHandle_v2, ...), with its arguments.
SIGNATURES: Dict[str, List[Any]] = {
    "cuInit": [ctypes.c_uint],
    "cuGetErrorName": [CUresult, _P(ctypes.c_char_p)],
    "cuGetErrorString": [CUresult, _P(ctypes.c_char_p)],
    "cuDeviceGet": [_P(CUdevice), ctypes.c_int],
    "cuDevicePrimaryCtxRetain": [_P(CUcontext), CUdevice],
    "cuCtxPushCurrent_v2": [CUcontext],
    "cuCtxPopCurrent_v2": [_P(CUcontext)],
    "cuCtxSynchronize": [],
    "cuMemImportFromShareableHandle": [
        _P(CUmemGenericAllocationHandle), ctypes.c_void_p, ctypes.c_int],
    "cuMemAddressReserve": [_P(CUdeviceptr), ctypes.c_size_t,
                            ctypes.c_size_t, CUdeviceptr, ctypes.c_ulonglong],
    "cuMemMap": [CUdeviceptr, ctypes.c_size_t, ctypes.c_size_t,
                 CUmemGenericAllocationHandle, ctypes.c_ulonglong],
    "cuMemSetAccess": [CUdeviceptr, ctypes.c_size_t, _P(CUmemAccessDesc),
                       ctypes.c_size_t],
    "cuMemUnmap": [CUdeviceptr, ctypes.c_size_t],
    "cuMemAddressFree": [CUdeviceptr, ctypes.c_size_t],
    "cuMemRelease": [CUmemGenericAllocationHandle],
    "cuIpcOpenMemHandle_v2": [_P(CUdeviceptr), CUipcMemHandle, ctypes.c_uint],
    "cuIpcCloseMemHandle": [CUdeviceptr],
    "cuMemHostRegister_v2": [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint],
    "cuMemHostUnregister": [ctypes.c_void_p],
}


class Driver:
    """The driver library's entry points. call() raises FailedPrecondition
    naming the call and the driver's error."""

    def __init__(self, library: Any) -> None:
        self._functions: Dict[str, Any] = {}
        for name, argtypes in SIGNATURES.items():
            function = getattr(library, name, None)
            if function is None:
                raise errors.FailedPrecondition(
                    f"the CUDA driver (libcuda.so.1) has no {name}: it is "
                    f"older than this client needs (CUDA 11.1)")
            function.argtypes = argtypes
            function.restype = CUresult
            self._functions[name] = function
        self._contexts: Dict[int, ctypes.c_void_p] = {}
        self._lock = threading.Lock()

    def call(self, name: str, *args: Any, check: bool = True) -> None:
        result = self._functions[name](*args)
        if check and result != CUDA_SUCCESS:
            raise errors.FailedPrecondition(
                f"{name} failed with {self.error(result)}")

    def error(self, result: int) -> str:
        """The driver's name and text of a CUresult."""
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self._functions["cuGetErrorName"](result, ctypes.byref(name))
        self._functions["cuGetErrorString"](result, ctypes.byref(text))
        if not name.value:
            return f"CUresult {result}"
        return (f"{name.value.decode()} "
                f"({(text.value or b'').decode()})")

    @contextlib.contextmanager
    def on(self, device: int) -> Iterator[None]:
        """Runs the block with `device`'s primary context current on this
        thread. The context is retained once, for the life of the process,
        as torch retains it."""
        with self._lock:
            context = self._contexts.get(device)
            if context is None:
                handle = CUdevice()
                self.call("cuDeviceGet", ctypes.byref(handle), device)
                context = CUcontext()
                self.call("cuDevicePrimaryCtxRetain", ctypes.byref(context),
                          handle)
                self._contexts[device] = context
        self.call("cuCtxPushCurrent_v2", context)
        try:
            yield
        finally:
            self.call("cuCtxPopCurrent_v2", ctypes.byref(CUcontext()),
                      check=False)


_driver: Optional[Driver] = None
_driver_lock = threading.Lock()


def driver() -> Driver:
    """The driver, loaded and initialized (cuInit) once; FailedPrecondition
    saying why not (a failure is not kept: the next call tries again)."""
    global _driver
    with _driver_lock:
        if _driver is None:
            try:
                library = ctypes.CDLL("libcuda.so.1")
            except OSError as e:
                raise errors.FailedPrecondition(
                    f"cannot load the CUDA driver libcuda.so.1: {e}") from None
            loaded = Driver(library)
            loaded.call("cuInit", 0)
            _driver = loaded
        return _driver


def unavailable(device: Optional[int] = None) -> Optional[str]:
    """Why this process cannot use GPU `device` (torch's index; None: the
    current one) for batches, or None when it can."""
    try:
        import torch
    except ImportError:
        return "torch with CUDA is not installed (torch is not importable)"
    if torch.version.cuda is None:
        return (f"torch with CUDA is not installed (torch "
                f"{torch.__version__} is built without CUDA)")
    if not torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return ("no GPU visible (torch.cuda.is_available() is False" +
                (f"; CUDA_VISIBLE_DEVICES={visible!r}"
                 if visible is not None else "") + ")")
    count = torch.cuda.device_count()
    if device is not None and not 0 <= device < count:
        return f"no GPU cuda:{device} (this process sees {count})"
    try:
        driver()
    except errors.FailedPrecondition as e:
        return e.message
    return None


def current_device() -> int:
    import torch
    return torch.cuda.current_device()


def gpu_uuid(device: int) -> str:
    """The UUID of GPU `device` as nvidia-smi -L prints it: what
    OpenStream.gpu_uuid names (indices differ between processes)."""
    import torch
    uuid = getattr(torch.cuda.get_device_properties(device), "uuid", None)
    if uuid is None:
        raise errors.FailedPrecondition(
            f"torch {torch.__version__} does not say its GPUs' UUIDs, which "
            f"cuda_ipc needs (torch 2.0 or later does)")
    return f"GPU-{uuid}"


class Fence(Protocol):
    """A point in the work queued on a GPU (a torch.cuda.Event is one)."""

    def query(self) -> bool:
        """Whether the work queued before it is done."""

    def synchronize(self) -> None:
        """Waits until it is."""


def fence(device: int) -> Fence:
    """A CUDA event recorded now on `device`'s current stream: it completes
    once the work queued there so far is done."""
    import torch
    cuda: Any = torch.cuda  # Untyped in torch 1.13.
    event: Fence = cuda.Event()
    cuda.current_stream(device).record_event(event)
    return event


# How to undo one step of a mapping.
_Undo = Callable[[], None]


def _map_vmm(d: Driver, fd: int, size: int, device: int
             ) -> Tuple[int, List[_Undo]]:
    handle = CUmemGenericAllocationHandle()
    d.call("cuMemImportFromShareableHandle", ctypes.byref(handle),
           ctypes.c_void_p(fd), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    undo: List[_Undo] = [
        lambda: d.call("cuMemRelease", handle, check=False)]
    try:
        address = CUdeviceptr()
        d.call("cuMemAddressReserve", ctypes.byref(address), size, 0, 0, 0)
        undo.append(lambda: d.call("cuMemAddressFree", address, size,
                                   check=False))
        d.call("cuMemMap", address, size, 0, handle, 0)
        undo.append(lambda: d.call("cuMemUnmap", address, size, check=False))
        ordinal = CUdevice()
        d.call("cuDeviceGet", ctypes.byref(ordinal), device)
        access = CUmemAccessDesc(
            CUmemLocation(CU_MEM_LOCATION_TYPE_DEVICE, ordinal.value),
            CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
        d.call("cuMemSetAccess", address, size, ctypes.byref(access), 1)
    except errors.StokerError:
        for step in reversed(undo):
            step()
        raise
    return address.value, undo


def _map_legacy(d: Driver, legacy_handle: bytes) -> Tuple[int, List[_Undo]]:
    if len(legacy_handle) != ctypes.sizeof(CUipcMemHandle):
        raise errors.DataLoss(
            f"the cuda_ipc header's legacy_handle has {len(legacy_handle)} "
            f"bytes, not {ctypes.sizeof(CUipcMemHandle)}")
    handle = CUipcMemHandle.from_buffer_copy(legacy_handle)
    address = CUdeviceptr()
    d.call("cuIpcOpenMemHandle_v2", ctypes.byref(address), handle,
           CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
    return address.value, [
        lambda: d.call("cuIpcCloseMemHandle", address, check=False)]


def _unmap(d: Driver, device: int, undo: List[_Undo]) -> None:
    # Work queued before the last tensor went may still read the ring.
    with d.on(device):
        d.call("cuCtxSynchronize", check=False)
        for step in reversed(undo):
            step()


class DeviceRing:
    """A cuda_ipc ring mapped on GPU `device` of this process: from `fd`
    (CUDA_HANDLE_VMM_POSIX_FD; closed here whatever happens) or from the
    header's legacy handle (CUDA_HANDLE_LEGACY_IPC, fd -1).
    FailedPrecondition naming the driver call that failed.

    tensor() gives torch tensors of its bytes, no copy; each keeps its
    owner, and the owner keeps the ring, alive. The ring is unmapped once
    it and all its tensors are collected, after the device has finished
    the work queued until then (cuCtxSynchronize), so that a kernel still
    reading a dropped tensor never reads unmapped memory."""

    def __init__(self, ring: pb.CudaIpcRing, fd: int, device: int) -> None:
        self.device = device
        self.slots = ring.slots
        self.slot_bytes = ring.slot_bytes
        try:
            d = driver()
            with d.on(device):
                if ring.handle_kind == pb.CUDA_HANDLE_VMM_POSIX_FD and fd >= 0:
                    self.base, undo = _map_vmm(d, fd, ring.ring_bytes, device)
                elif ring.handle_kind == pb.CUDA_HANDLE_LEGACY_IPC:
                    self.base, undo = _map_legacy(d, ring.legacy_handle)
                else:
                    raise errors.Internal(
                        f"a cuda_ipc ring of handle kind "
                        f"{pb.CudaHandleKind.Name(ring.handle_kind)} cannot "
                        f"be mapped")
        finally:
            # The import holds the allocation; the descriptor is not needed.
            if fd >= 0:
                os.close(fd)
        unmap = weakref.finalize(self, _unmap, d, device, undo)
        unmap.atexit = False  # The process's end frees it all.

    def tensor(self, offset: int, dtype: "np.dtype[Any]",
               shape: Tuple[int, ...], owner: object) -> "torch.Tensor":
        """The tensor of `dtype` and `shape` at byte `offset` of the ring."""
        import torch
        address = self.base + offset
        view = _DeviceArray({"shape": shape, "typestr": dtype.str,
                             "data": (address, False), "strides": None,
                             "version": 2}, owner)
        try:
            tensor = torch.as_tensor(view, device=torch.device("cuda",
                                                               self.device))
        except (TypeError, ValueError, RuntimeError) as e:
            raise errors.Internal(f"torch cannot view the cuda_ipc ring as "
                                  f"{dtype}{list(shape)}: {e}") from None
        if tensor.numel() > 0 and tensor.data_ptr() != address:
            raise errors.Internal("torch copied a tensor of the cuda_ipc "
                                  "ring instead of viewing it")
        return tensor


class Slot:
    """One batch's slot of a DeviceRing: what its tensors keep alive."""

    __slots__ = ("ring", "index", "__weakref__")

    def __init__(self, ring: DeviceRing, index: int) -> None:
        self.ring = ring
        self.index = index


class _DeviceArray:
    """What torch.as_tensor reads a device array's place from (the CUDA
    array interface, version 2: no stream, as the daemon announces a batch
    only once it is complete on the device). The tensor keeps it, and so
    `owner`, alive."""

    def __init__(self, interface: Dict[str, Any], owner: object) -> None:
        self.__cuda_array_interface__ = interface
        self.owner = owner


def _unregister(d: Driver, device: int, memory: "npt.NDArray[np.uint8]"
                ) -> None:
    # Copies queued from the memory may still be running. `memory`, a view
    # of the mapping, keeps it mapped until it is unregistered.
    with d.on(device):
        d.call("cuCtxSynchronize", check=False)
        d.call("cuMemHostUnregister", ctypes.c_void_p(memory.ctypes.data),
               check=False)


class HostRegistration:
    """`memory` (read-only, e.g. a view of an shm ring) page-locked for GPU
    `device` (cuMemHostRegister), so that copies from it run asynchronously;
    FailedPrecondition naming the driver's error when it cannot be. Undone
    by close() or when collected, after the device has finished the work
    queued until then.

    The driver, not torch's cudaHostRegister: a failed runtime call leaves
    its error behind for torch's next kernel launch check to raise."""

    def __init__(self, memory: "npt.NDArray[np.uint8]", device: int) -> None:
        d = driver()
        with d.on(device):
            d.call("cuMemHostRegister_v2", ctypes.c_void_p(memory.ctypes.data),
                   memory.nbytes,
                   CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_READ_ONLY)
        self._undo = weakref.finalize(self, _unregister, d, device, memory)
        self._undo.atexit = False

    def close(self) -> None:
        self._undo()
