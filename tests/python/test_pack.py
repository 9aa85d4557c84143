"""`stoker pack`, `verify` and `inspect` as a user runs them."""
import json
import shutil

from conftest import STOKER, make_images, run


def test_pack_skips_bad_files_and_names_each(tmp_path):
    src = make_images(tmp_path / "src", 12, classes=2)
    bad_png = src / "class_000" / "fake.jpg"
    bad_png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    empty = src / "class_001" / "empty.jpg"
    empty.write_bytes(b"")
    out = run([STOKER, "pack", src, tmp_path / "ds", "--on-error", "skip"])
    report = out.stdout + out.stderr
    assert str(bad_png) in report or "fake.jpg" in report
    assert str(empty) in report or "empty.jpg" in report
    info = json.loads(run([STOKER, "inspect", tmp_path / "ds", "--json"]).stdout)
    assert info["num_samples"] == 12
    assert info["classes"] == ["class_000", "class_001"]
    run([STOKER, "verify", tmp_path / "ds"])


def test_pack_fail_mode_leaves_no_dataset(tmp_path):
    src = make_images(tmp_path / "src", 6, classes=2)
    (src / "class_000" / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0junk")
    out = run([STOKER, "pack", src, tmp_path / "ds", "--on-error", "fail"],
              check=False)
    assert out.returncode != 0
    assert "broken.jpg" in out.stdout + out.stderr
    assert not (tmp_path / "ds").exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith("ds")] == []


def test_verify_finds_a_flipped_byte(tmp_path):
    src = make_images(tmp_path / "src", 8, classes=2)
    run([STOKER, "pack", src, tmp_path / "ds", "--shards", 1])
    shard = tmp_path / "ds" / "shard-00000.lmdb"
    data = bytearray(shard.read_bytes())
    at = data.find(b"\xff\xd8\xff") + 300
    data[at] ^= 0xFF
    shard.write_bytes(bytes(data))
    out = run([STOKER, "verify", tmp_path / "ds"], check=False)
    assert out.returncode == 1
    assert "shard-00000.lmdb" in out.stdout + out.stderr


def test_pack_refuses_an_existing_destination_without_force(tmp_path):
    src = make_images(tmp_path / "src", 4, classes=2)
    run([STOKER, "pack", src, tmp_path / "ds"])
    out = run([STOKER, "pack", src, tmp_path / "ds"], check=False)
    assert out.returncode != 0 and "--force" in out.stdout + out.stderr
    run([STOKER, "pack", src, tmp_path / "ds", "--force"])
    shutil.rmtree(tmp_path / "ds")
