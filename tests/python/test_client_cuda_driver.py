"""The Python client's CUDA driver bindings without a GPU: their layouts,
constants and symbol versions against cuda.h, and the driver calls that map
a cuda_ipc ring and page-lock host memory, against a fake driver."""
import contextlib
import ctypes
import os
import re
from pathlib import Path

import pytest

import stoker
from stoker import _cuda
from stoker._proto.stoker.v1 import stoker_pb2 as pb

torch = pytest.importorskip("torch")

CUDA_H = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include" / \
    "cuda.h"


# The driver bindings against cuda.h.

def header():
    if not CUDA_H.exists():
        pytest.skip(f"no CUDA toolkit header at {CUDA_H}")
    return CUDA_H.read_text()


def test_driver_structs_have_the_layout_of_cuda_h():
    text = header()

    def fields(struct):
        body = re.search(r"typedef struct %s \{(.*?)\}" % struct, text,
                         re.S).group(1)
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        return [tuple(line.split()) for line in body.split(";")
                if line.split()]

    # Enums are ints; CUmemLocation then CUmemAccessDesc, field by field.
    assert fields("CUmemLocation_st") == [("CUmemLocationType", "type"),
                                         ("int", "id")]
    assert fields("CUmemAccessDesc_st") == [("CUmemLocation", "location"),
                                           ("CUmemAccess_flags", "flags")]
    assert [f[0] for f in _cuda.CUmemLocation._fields_] == ["type", "id"]
    assert [f[0] for f in _cuda.CUmemAccessDesc._fields_] == ["location",
                                                              "flags"]
    assert ctypes.sizeof(_cuda.CUmemLocation) == 8
    assert _cuda.CUmemLocation.id.offset == 4
    assert ctypes.sizeof(_cuda.CUmemAccessDesc) == 12
    assert _cuda.CUmemAccessDesc.flags.offset == 8
    size = int(re.search(r"#define CU_IPC_HANDLE_SIZE (\d+)", text).group(1))
    assert ctypes.sizeof(_cuda.CUipcMemHandle) == size
    assert "typedef unsigned long long CUdeviceptr_v2;" in text
    assert "typedef unsigned long long CUmemGenericAllocationHandle_v1;" in text
    assert ctypes.sizeof(_cuda.CUdeviceptr) == 8
    assert ctypes.sizeof(_cuda.CUmemGenericAllocationHandle) == 8


def test_driver_constants_are_those_of_cuda_h():
    text = header()
    for name in ("CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR",
                 "CU_MEM_LOCATION_TYPE_DEVICE",
                 "CU_MEM_ACCESS_FLAGS_PROT_READWRITE",
                 "CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS",
                 "CU_MEMHOSTREGISTER_PORTABLE", "CU_MEMHOSTREGISTER_READ_ONLY"):
        value = re.search(r"\b%s\s*=?\s*(0x[0-9a-fA-F]+|\d+)" % name, text)
        assert value, name
        assert int(value.group(1), 0) == getattr(_cuda, name), name


def test_driver_symbols_are_the_versions_cuda_h_maps_names_to():
    # cuda.h #defines e.g. cuIpcOpenMemHandle to cuIpcOpenMemHandle_v2; a
    # call of the unversioned symbol gets the old ABI.
    text = header()
    mapped = dict(re.findall(r"#define (cu\w+)\s+(?:__CUDA_API_\w+\()?(cu\w+)",
                             text))
    for symbol in _cuda.SIGNATURES:
        name = re.sub(r"_v\d+$", "", symbol)
        assert mapped.get(name, name) == symbol, (name, mapped.get(name))
        assert re.search(r"CUresult CUDAAPI %s\(" % name, text), name


# The mapping's driver calls, against a fake driver.

class FakeDriver:
    """Records each call; gives out addresses and handles."""

    def __init__(self):
        self.calls = []
        self.current = []

    @contextlib.contextmanager
    def on(self, device):
        self.current.append(device)
        try:
            yield
        finally:
            self.current.pop()

    def call(self, name, *args, check=True):
        assert self.current, f"{name} outside a context"
        if name == "cuMemImportFromShareableHandle":
            args[0]._obj.value = 0x51
            self.calls.append((name, args[1].value, args[2]))
        elif name == "cuMemAddressReserve":
            args[0]._obj.value = 0x7F0000000000
            self.calls.append((name,) + args[1:])
        elif name == "cuIpcOpenMemHandle_v2":
            args[0]._obj.value = 0x7E0000000000
            self.calls.append((name, bytes(args[1]), args[2]))
        elif name == "cuDeviceGet":
            args[0]._obj.value = args[1]
            self.calls.append((name, args[1]))
        elif name == "cuMemSetAccess":
            desc = args[2]._obj
            self.calls.append((name, args[0].value, args[1],
                               (desc.location.type, desc.location.id,
                                desc.flags), args[3]))
        else:
            self.calls.append((name,) + tuple(
                getattr(a, "value", a) for a in args))


def test_a_vmm_ring_is_imported_mapped_and_made_accessible_then_undone(
        monkeypatch):
    d = FakeDriver()
    monkeypatch.setattr(_cuda, "driver", lambda: d)
    read, write = os.pipe()
    os.close(write)
    ring = pb.CudaIpcRing(handle_kind=pb.CUDA_HANDLE_VMM_POSIX_FD, slots=3,
                          slot_bytes=1000, ring_bytes=1 << 21)
    mapped = _cuda.DeviceRing(ring, read, 2)
    with pytest.raises(OSError):
        os.close(read)  # Closed after the import.
    assert mapped.base == 0x7F0000000000
    assert d.calls == [
        ("cuMemImportFromShareableHandle", read, 1),
        ("cuMemAddressReserve", 1 << 21, 0, 0, 0),
        ("cuMemMap", 0x7F0000000000, 1 << 21, 0, 0x51, 0),
        ("cuDeviceGet", 2),
        ("cuMemSetAccess", 0x7F0000000000, 1 << 21, (1, 2, 3), 1)]
    d.calls = []
    del mapped  # The last reference: unmapped, after a synchronize.
    assert d.calls == [("cuCtxSynchronize",),
                       ("cuMemUnmap", 0x7F0000000000, 1 << 21),
                       ("cuMemAddressFree", 0x7F0000000000, 1 << 21),
                       ("cuMemRelease", 0x51)]


def test_a_legacy_ring_is_opened_with_its_handle_and_closed():
    d = FakeDriver()
    handle = bytes(range(64))
    ring = pb.CudaIpcRing(handle_kind=pb.CUDA_HANDLE_LEGACY_IPC, slots=1,
                          slot_bytes=64, ring_bytes=64, legacy_handle=handle)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_cuda, "driver", lambda: d)
        mapped = _cuda.DeviceRing(ring, -1, 0)
        slot = _cuda.Slot(mapped, 0)
        del mapped
        assert d.calls == [("cuIpcOpenMemHandle_v2", handle, 1)]
        del slot  # The slot kept the ring.
        assert d.calls[1:] == [("cuCtxSynchronize",),
                               ("cuIpcCloseMemHandle", 0x7E0000000000)]
        with pytest.raises(stoker.DataLoss, match="legacy_handle has 3"):
            _cuda.DeviceRing(pb.CudaIpcRing(
                handle_kind=pb.CUDA_HANDLE_LEGACY_IPC, legacy_handle=b"abc"),
                -1, 0)


def test_a_failed_mapping_undoes_what_it_did_and_names_the_call(monkeypatch):
    d = FakeDriver()
    record = d.call

    def failing(name, *args, check=True):
        record(name, *args, check=check)
        if name == "cuMemMap":
            raise stoker.FailedPrecondition(
                "cuMemMap failed with CUDA_ERROR_INVALID_VALUE")

    d.call = failing
    monkeypatch.setattr(_cuda, "driver", lambda: d)
    read, write = os.pipe()
    os.close(write)
    ring = pb.CudaIpcRing(handle_kind=pb.CUDA_HANDLE_VMM_POSIX_FD, slots=1,
                          slot_bytes=10, ring_bytes=4096)
    with pytest.raises(stoker.FailedPrecondition, match="cuMemMap failed"):
        _cuda.DeviceRing(ring, read, 0)
    with pytest.raises(OSError):
        os.close(read)
    assert [c[0] for c in d.calls] == [
        "cuMemImportFromShareableHandle", "cuMemAddressReserve", "cuMemMap",
        "cuMemAddressFree", "cuMemRelease"]


def test_host_memory_is_registered_read_only_and_unregistered_after_a_sync(
        monkeypatch):
    import numpy as np
    d = FakeDriver()
    monkeypatch.setattr(_cuda, "driver", lambda: d)
    memory = np.zeros(8192, dtype=np.uint8)
    pin = _cuda.HostRegistration(memory, 1)
    assert d.calls == [("cuMemHostRegister_v2", memory.ctypes.data, 8192,
                        1 | 8)]
    pin.close()
    pin.close()  # Once.
    assert d.calls[1:] == [("cuCtxSynchronize",),
                           ("cuMemHostUnregister", memory.ctypes.data)]
