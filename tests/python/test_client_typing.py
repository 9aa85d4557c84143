"""The Python client's public API is typed (it ships py.typed): `mypy --strict`
passes on the package, with the configuration in client/python/pyproject.toml
(which leaves out the generated code under stoker/_proto)."""
import importlib.util
import subprocess
import sys

import pytest

from conftest import PYTHON_CLIENT


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not importable here (Debian: "
                           "apt-get install python3-mypy)")
def test_the_package_passes_mypy_strict():
    # The cache (client/python/.mypy_cache, ignored by git) makes a second
    # run take seconds; a first one reads torch's types and takes longer.
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "stoker"],
        cwd=PYTHON_CLIENT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Success: no issues found" in out.stdout
