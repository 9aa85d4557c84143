"""The Python client as a package: generated code up to date, pip-installable,
and the example runs."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import PYTHON_CLIENT, run

GENERATED = PYTHON_CLIENT / "stoker" / "_proto"


def files_under(root):
    return {p.relative_to(root): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def test_regenerated_proto_code_is_identical(tmp_path):
    out = run(["sh", PYTHON_CLIENT / "regen_proto.sh", tmp_path / "gen"],
              check=False, env=dict(os.environ, PYTHON=sys.executable))
    if out.returncode == 2:
        pytest.skip("no protoc 3.21 to regenerate with (grpc_tools or "
                    "protoc + grpc_python_plugin): " + out.stderr.strip())
    assert out.returncode == 0, out.stderr
    fresh = files_under(tmp_path / "gen")
    assert set(fresh) == set(files_under(GENERATED))
    for name, data in files_under(GENERATED).items():
        assert fresh[name] == data, (
            f"{name} is stale: run client/python/regen_proto.sh")


def test_generated_code_has_no_absolute_stoker_imports():
    for name, data in files_under(GENERATED).items():
        for line in data.decode().splitlines():
            assert not line.startswith(("from stoker.", "import stoker")), (
                name, line)


def test_pip_installs_the_package_without_a_compiler(tmp_path):
    # Offline: use the system's setuptools rather than fetching one.
    source = tmp_path / "src"
    shutil.copytree(PYTHON_CLIENT, source,
                    ignore=shutil.ignore_patterns("__pycache__", "build",
                                                  "*.egg-info",
                                                  ".mypy_cache"))
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--system-site-packages", venv])
    python = venv / "bin" / "python"
    run([python, "-m", "pip", "install", "--quiet", "--no-deps",
         "--no-build-isolation", "--no-index", source])
    out = run([python, "-c",
               "import stoker, stoker.torch, stoker._proto.stoker.v1."
               "stoker_pb2_grpc as g; print(stoker.__file__); "
               "print(g.StokerStub.__name__)"],
              cwd=tmp_path, env={k: v for k, v in os.environ.items()
                                 if k != "PYTHONPATH"})
    where, stub = out.stdout.split()
    assert where.startswith(str(venv)) and stub == "StokerStub"
    assert list(venv.rglob("stoker_pb2.pyi")) and list(venv.rglob("py.typed"))


def test_train_resnet_example_runs_two_steps_on_cpu(client_daemon):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=str(PYTHON_CLIENT))
    out = subprocess.run(
        [sys.executable, PYTHON_CLIENT / "examples" / "train_resnet.py",
         "--address", client_daemon.address, "--dataset", "train",
         "--pipeline", "train", "--batch-size", "8", "--steps", "2",
         "--device", "cpu"], capture_output=True, text=True, env=env,
        timeout=120)
    assert out.returncode == 0, out.stderr
    assert "step 2: loss" in out.stdout
    assert "done: 2 steps, 16 samples" in out.stdout
    assert "samples/s over shm" in out.stdout
