"""bench/formats, the per-format decode benchmark, runs end to end: Stoker's
decoders and PIL decode every file it writes (RGB, RGBA, palette and gray
PNGs, WebP, deflate TIFF) and it reports a figure for each."""
import json
import subprocess
import sys

from conftest import BUILD, ROOT


def test_every_format_is_decoded_by_both_and_reported(tmp_path):
    out = subprocess.run(
        [sys.executable, ROOT / "bench" / "formats", "--build-dir", BUILD,
         "--images", "3", "--repeats", "1", "--out", tmp_path],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    [result] = list(tmp_path.glob("formats-*.json"))
    report = json.loads(result.read_text())
    assert report["images"] == 3
    assert set(report["formats"]) == {"jpeg", "png", "png-rgba", "png-palette",
                                      "png-gray", "webp", "tiff"}
    for name, r in report["formats"].items():
        assert r["stoker_ms_per_image"] > 0 and r["pil_ms_per_image"] > 0, name
        assert r["bytes"] > 0, name
        assert f"\n{name} " in out.stdout, out.stdout


def test_an_unknown_format_is_a_usage_error_naming_the_known_ones(tmp_path):
    out = subprocess.run(
        [sys.executable, ROOT / "bench" / "formats", "--build-dir", BUILD,
         "--formats", "png,gif", "--out", tmp_path],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "unknown format(s) gif" in out.stderr and "png-palette" in out.stderr
