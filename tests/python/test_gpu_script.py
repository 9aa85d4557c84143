"""tests/gpu/run.sh on the build machine: the bundle it packs for a GPU
machine holds every library its binaries need and runs here, on this
machine's glibc and on the bundle's own; without a GPU, `run` stops at once
and says why."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, ROOT

SCRIPT = ROOT / "tests" / "gpu" / "run.sh"
LIMIT = 64 * 1024 * 1024


def cuda_built():
    cache = BUILD / "CMakeCache.txt"
    return (cache.exists() and "STOKER_CUDA_SUPPORT:INTERNAL=ON\n"
            in cache.read_text())


def script(*args, env=None, **kwargs):
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, env=env, **kwargs)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    if not cuda_built():
        pytest.skip(f"{BUILD} was built without CUDA: there is nothing to "
                    "pack for a GPU machine")
    out = tmp_path_factory.mktemp("gpu") / "bundle"
    packed = script("pack", BUILD, out, timeout=120)
    assert packed.returncode == 0, packed.stderr
    assert "packed" in packed.stdout
    return out


def test_the_bundle_is_small_and_names_the_glibc_it_needs(bundle):
    tarball = bundle.parent / "bundle.tar.gz"
    assert tarball.stat().st_size < LIMIT
    need = (bundle / "NEEDS_GLIBC").read_text().strip()
    assert need.count(".") == 1 and all(p.isdigit() for p in need.split("."))
    assert (bundle / "glibc" / "ld-linux-x86-64.so.2").exists()
    assert (bundle / "glibc" / "libc.so.6").exists()
    # The driver is the GPU machine's, never carried.
    assert not [p.name for p in bundle.rglob("libcuda*")]
    assert "commit:" in (bundle / "BUILT").read_text()
    # The dataset the stream checks read, packed.
    assert (bundle / "data" / "bench" / "manifest.json").exists()


@pytest.mark.parametrize("bundled_glibc", ["0", "1"])
def test_bundled_binaries_run_on_either_glibc(bundle, bundled_glibc, tmp_path):
    env = dict(os.environ, STOKER_GPU_BUNDLED_GLIBC=bundled_glibc,
               LD_LIBRARY_PATH="", TMPDIR=str(tmp_path))
    # From the tarball, as it travels.
    version = script("exec", bundle.parent / "bundle.tar.gz", "stokerd",
                     "--version", env=env, timeout=60)
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("stokerd ")
    assert "CUDA: built" in version.stdout
    assert ("bundle's glibc" if bundled_glibc == "1"
            else "this machine's glibc") in version.stderr
    test = script("exec", bundle, "device_normalize_test", env=env,
                  timeout=60)
    assert test.returncode == 0, test.stdout[-2000:]
    assert "[  PASSED  ] 6 tests." in test.stdout


def test_run_without_a_gpu_stops_and_says_why(tmp_path):
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi: run.sh would run")
    fake = tmp_path / "bundle"
    fake.mkdir()
    (fake / "NEEDS_GLIBC").write_text("2.36\n")
    ran = script("run", fake, timeout=30)
    assert ran.returncode == 2
    assert "no GPU here: nvidia-smi is not installed" in ran.stderr
    # With OUT set (as a device run sets it), the log goes there too.
    out = tmp_path / "out"
    logged = script("run", fake, env=dict(os.environ, OUT=str(out)),
                    timeout=30)
    assert logged.returncode == 2
    assert "no GPU here" in (out / "gpu-run.log").read_text()


def test_run_refuses_what_is_not_a_bundle(tmp_path):
    ran = script("run", tmp_path, timeout=30)
    assert ran.returncode == 1
    assert "is not a bundle of 'tests/gpu/run.sh pack'" in ran.stderr
