"""The Python client's cuda_ipc and shm-to-GPU paths against a running
stokerd built with CUDA, on a GPU machine (tests/gpu/run.sh starts the
daemon and runs this file).

    STOKER_GPU_ADDRESS=unix:/path/stoker.sock STOKER_GPU_DATASET=train \\
    STOKER_GPU_PIPELINE=train python3 -m pytest -q tests/gpu/test_cuda_python.py

Without pytest, ``python3 tests/gpu/test_cuda_python.py`` runs the same
tests and exits 1 if one failed. Each test is skipped when those variables
are unset. With them set, torch must see a GPU: a machine that cannot run
the tests fails them, it does not skip them. The stoker package is imported
from client/python of this checkout (its generated protobuf code is in the
package); it needs torch with CUDA, numpy, grpcio and protobuf. One epoch
of the dataset is read twice (over cuda_ipc and over shm, side by side);
the Loader test reads a few batches.
"""
import os
import sys
import traceback
from pathlib import Path

try:
    import pytest
except ImportError:  # Run as a script: see main().
    pytest = None

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client" /
                       "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import stoker  # noqa: E402
from stoker import _cuda  # noqa: E402
from stoker.torch import Loader  # noqa: E402

ADDRESS = os.environ.get("STOKER_GPU_ADDRESS", "")
DATASET = os.environ.get("STOKER_GPU_DATASET", "")
PIPELINE = os.environ.get("STOKER_GPU_PIPELINE", "")

UNSET = ("STOKER_GPU_ADDRESS, STOKER_GPU_DATASET and STOKER_GPU_PIPELINE "
         "name the daemon and the stream to test")

BATCH = 8
SEED = 11
LOADER_BATCHES = 5


def gpu():
    why = _cuda.unavailable(None)
    assert why is None, f"this machine cannot run the GPU tests: {why}"
    return torch.device("cuda", torch.cuda.current_device())


if pytest is not None:
    pytestmark = pytest.mark.skipif(not (ADDRESS and DATASET and PIPELINE),
                                    reason=UNSET)

    @pytest.fixture(scope="module")
    def device():
        return gpu()


def fields(batch):
    """{name: array or tensor} of a stoker.Batch, a ragged field as its
    values and <name>.offsets."""
    out = {}
    for name, value in batch.items():
        if isinstance(value, stoker.Ragged):
            out[name], out[name + ".offsets"] = value.values, value.offsets
        else:
            out[name] = value
    return out


def assert_same(got, want, where):
    """Device tensors `got` equal `want` (tensors on the same device): float
    within 1e-6, others exactly."""
    assert sorted(got) == sorted(want), where
    for name, tensor in got.items():
        expected = want[name]
        assert tensor.dtype == expected.dtype, (where, name)
        assert tensor.shape == expected.shape, (where, name)
        assert tensor.device == expected.device, (where, name)
        if tensor.is_floating_point():
            diff = (tensor.double() - expected.double()).abs().max().item() \
                if tensor.numel() else 0.0
            assert diff <= 1e-6, (where, name, diff)
        else:
            assert torch.equal(tensor, expected), (where, name)


def on_device(arrays, device):
    return {name: torch.from_numpy(np.array(a)).to(device)
            for name, a in arrays.items()}


def test_a_cuda_ipc_epoch_equals_the_same_batches_over_shm(device):
    client = stoker.Client(ADDRESS)
    args = dict(dataset=DATASET, pipeline=PIPELINE, batch_size=BATCH,
                seed=SEED, epochs=1, prefetch=1, hold=1)
    ids = []
    delayed = []  # (position, copies queued behind a GPU sleep, expected)
    with client.stream(job_id="gpu-python-ipc", transport="cuda_ipc",
                       **args) as ipc, \
            client.stream(job_id="gpu-python-shm", transport="shm",
                          **args) as shm:
        assert ipc.transport == "cuda_ipc" and ipc.on_device
        assert ipc.notice_socket
        assert ipc.info.steps_per_epoch == shm.info.steps_per_epoch
        for got, want in zip(ipc, shm):
            where = f"epoch {got.epoch} step {got.step}"
            assert got.position == want.position, where
            assert got.sample_ids == want.sample_ids, where
            tensors = fields(got)
            for name, tensor in tensors.items():
                assert tensor.is_cuda and tensor.device == device, (where,
                                                                    name)
            expected = on_device(fields(want), device)
            assert_same(tensors, expected, where)
            if len(delayed) < 3:
                # A kernel that reads the batch long after its release: the
                # ack must wait for it, or the daemon (two slots) would
                # overwrite the slot under it.
                torch.cuda._sleep(200_000_000)
                delayed.append((where, {name: t.clone() for name, t in
                                        tensors.items()}, expected))
            ids += got.sample_ids
            got.release()
            want.release()
        assert ipc.closed  # Read to its end.
        assert next(shm, None) is None  # The same number of batches.
    torch.cuda.synchronize()
    for where, copies, expected in delayed:
        assert_same(copies, expected, where + " (read after its release)")
    assert len(ids) == len(set(ids)), "a sample id came twice in the epoch"
    assert len(ids) == ipc.info.samples_per_epoch


def test_a_gpu_loader_chooses_cuda_ipc_and_a_shm_one_copies_the_same_values(
        device):
    args = dict(dataset=DATASET, pipeline=PIPELINE, batch_size=BATCH,
                seed=SEED, epochs=1, rank=0, world_size=1, device=device)
    ipc = Loader(ADDRESS, job_id="gpu-python-loader-ipc", **args)
    shm = Loader(ADDRESS, job_id="gpu-python-loader-shm", transport="shm",
                 **args)
    try:
        seen = 0
        for got, want in zip(ipc, shm):
            if seen == 0:
                assert ipc.transport == "cuda_ipc", ipc.transport_reason
                assert "cuda_ipc granted" in ipc.transport_reason
                assert shm.transport == "shm" and shm.pinned, (
                    "the shm ring was not page-locked; see the log")
                assert not ipc.pinned
            where = f"epoch {got.epoch} step {got.step}"
            assert got.position == want.position, where
            assert got.sample_ids == want.sample_ids, where
            for name, tensor in got.items():
                assert tensor.device == device, (where, name)
            assert_same(dict(got), dict(want), where)
            seen += 1
            if seen == LOADER_BATCHES:
                break
        assert seen == min(LOADER_BATCHES, len(ipc))
    finally:
        ipc.close()
        shm.close()


def main():
    if not (ADDRESS and DATASET and PIPELINE):
        print(f"skipped: {UNSET}")
        return 0
    device = gpu()
    failed = []
    tests = (test_a_cuda_ipc_epoch_equals_the_same_batches_over_shm,
             test_a_gpu_loader_chooses_cuda_ipc_and_a_shm_one_copies_the_same_values)  # noqa: E501
    for test in tests:
        try:
            test(device)
        except Exception:
            traceback.print_exc()
            failed.append(test.__name__)
            print(f"FAILED {test.__name__}", flush=True)
        else:
            print(f"PASSED {test.__name__}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
