"""bench/ops, the per-op cost benchmark, runs end to end: every op that
stoker_bench ops times has its torchvision counterpart, and each gets a
figure from both (the tensor path, and PIL where torchvision takes it)."""
import json
import subprocess
import sys

from conftest import BUILD, ROOT


def test_every_op_is_timed_in_both_and_reported(tmp_path):
    out = subprocess.run(
        [sys.executable, ROOT / "bench" / "ops", "--build-dir", BUILD,
         "--seconds", "0.01", "--repeats", "1", "--out", tmp_path],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    [result] = list(tmp_path.glob("ops-*.json"))
    table = json.loads(result.read_text())["table"]
    names = {row["op"] for row in table}
    assert {"color_jitter", "trivial_augment_wide", "rand_augment",
            "auto_augment", "gaussian_blur_23", "random_erasing"} <= names
    for row in table:
        assert row["stoker_us"] > 0 and row["torchvision_tensor_us"] > 0, row
        assert f"\n{row['op']} " in out.stdout, out.stdout
        if row["op"] != "random_erasing":
            assert row["torchvision_pil_us"] > 0, row


def test_a_missing_build_is_a_setup_error(tmp_path):
    out = subprocess.run(
        [sys.executable, ROOT / "bench" / "ops", "--build-dir", tmp_path],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "no " in out.stderr and "stoker_bench" in out.stderr
