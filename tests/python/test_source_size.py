"""No hand-written source file is over 500 lines (house style: a file over
about 400 lines is a sign to split state from logic; none over 500).

Sources are the files git tracks that are code, build or interface text:
C++ and CUDA (.cc .h .cu .cuh), Python (.py and the scripts whose first line
is a #! line, such as bench/run), shell, CMake, and the .proto files.
Generated files are left out: the Python client's protobuf and gRPC code
under client/python/stoker/_proto/ (client/python/regen_proto.sh writes it).
Documentation, configs and data (Markdown, YAML, JSON, fuzz corpora) are not
sources."""
import shutil
import subprocess

import pytest

from conftest import ROOT

LIMIT = 500
SUFFIXES = (".cc", ".h", ".cu", ".cuh", ".py", ".pyi", ".sh", ".cmake",
            ".proto", ".in")
GENERATED = ("client/python/stoker/_proto/",)


def tracked_files():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files")
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                         capture_output=True)
    return [name for name in out.stdout.decode().split("\0") if name]


def is_source(name):
    if name.startswith(GENERATED):
        return False
    path = ROOT / name
    if not path.is_file():
        return False  # Deleted in the work tree, not yet in the index.
    if name.endswith(SUFFIXES) or path.name == "CMakeLists.txt":
        return True
    with open(path, "rb") as f:
        return f.read(2) == b"#!"


def test_no_hand_written_source_file_is_over_500_lines():
    sizes = {}
    for name in tracked_files():
        if is_source(name):
            with open(ROOT / name, "rb") as f:
                sizes[name] = f.read().count(b"\n")
    assert len(sizes) > 100, "found too few sources: is ROOT the repository?"
    over = {name: n for name, n in sizes.items() if n > LIMIT}
    assert not over, (
        f"over {LIMIT} lines (split each along its seams): {over}")


def test_the_generated_code_is_the_only_exclusion():
    # Each excluded folder holds only what regen_proto.sh writes (its
    # freshness: test_client_package.py), so the exclusion cannot hide a
    # hand-written file.
    for folder in GENERATED:
        files = [n for n in tracked_files() if n.startswith(folder)]
        assert files, folder
        for name in files:
            assert name.endswith(("/__init__.py", "_pb2.py", "_pb2.pyi",
                                  "_pb2_grpc.py")), name
