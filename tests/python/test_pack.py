"""`stoker pack`, `verify` and `inspect` as a user runs them."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, STOKER, make_images, run


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


def test_pack_refuses_a_class_folder_that_is_not_utf8(tmp_path):
    src = make_images(tmp_path / "src", 6, classes=2)
    latin1 = os.path.join(os.fsencode(src), b"caf\xe9")
    os.rename(os.fsencode(src / "class_001"), latin1)
    out = run([STOKER, "pack", src, tmp_path / "ds"], check=False)
    # Used to abort (134) on nlohmann's exception, leaving ds.tmp-PID.
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert "class folder 'caf\\xe9'" in out.stderr, out.stderr
    assert "not UTF-8" in out.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["src"]


def test_pack_removes_temp_folders_of_killed_packs(tmp_path):
    src = make_images(tmp_path / "src", 6, classes=2)
    gone = subprocess.Popen(["true"])
    gone.wait()  # Its pid names no process now.
    stale = tmp_path / f"ds.tmp-{gone.pid}"
    stale.mkdir()
    (stale / ".stoker-pack-temp").write_bytes(b"")  # A pack's own.
    (stale / "shard-00000.lmdb").write_bytes(b"\0" * 4096)
    alive = tmp_path / f"ds.tmp-{os.getpid()}"  # A pack that still runs.
    alive.mkdir()
    (alive / ".stoker-pack-temp").write_bytes(b"")
    other = tmp_path / f"other.tmp-{gone.pid}"  # Another DST's.
    other.mkdir()
    (other / ".stoker-pack-temp").write_bytes(b"")
    gone2 = subprocess.Popen(["true"])
    gone2.wait()
    users = tmp_path / f"ds.tmp-{gone2.pid}"  # A user's: no marker.
    users.mkdir()
    (users / "photo.jpg").write_bytes(b"mine")
    out = run([STOKER, "pack", src, tmp_path / "ds"])
    assert (f"removed {stale}, left by pack process {gone.pid}, which is "
            "gone") in out.stderr, out.stderr
    assert not stale.exists()
    assert alive.exists() and other.exists()
    assert (users / "photo.jpg").read_bytes() == b"mine"
    assert str(users) not in out.stderr
    run([STOKER, "verify", tmp_path / "ds"])
    assert sorted(p.name for p in (tmp_path / "ds").iterdir()) == [
        "manifest.json", "shard-00000.idx", "shard-00000.lmdb"]


def test_pack_into_a_missing_parent_folder_names_it(tmp_path):
    src = make_images(tmp_path / "src", 2, classes=1)
    out = run([STOKER, "pack", src, tmp_path / "no" / "ds"], check=False)
    assert out.returncode == 1
    assert (f"its parent folder {tmp_path}/no does not exist; create it "
            f"first (mkdir -p {tmp_path}/no)") in out.stderr, out.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_pack_refuses_an_empty_class_folder_naming_it(tmp_path):
    src = make_images(tmp_path / "src", 4, classes=2)
    (src / "a_empty").mkdir()
    (src / "a_empty" / ".hidden").write_bytes(b"")
    out = run([STOKER, "pack", src, tmp_path / "ds"], check=False)
    assert out.returncode == 1
    assert (f"class folder 'a_empty' (label 0) in {src} holds no files"
            in out.stderr), out.stderr
    assert "shift the label of every class after it" in out.stderr
    assert not (tmp_path / "ds").exists()


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 2 MiB tmpfs, or a skip saying why there is none."""
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    out = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs",
                          str(mount)], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {out.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_pack_on_a_full_disk_says_how_much_space_it_needs(tmp_path,
                                                          tiny_tmpfs):
    # 600 images of about 2.5 KB: 1.5 MB of files fits in 2 MiB, but LMDB
    # gives each value a 4 KiB page of its own, about 2.5 MB.
    src = tmp_path / "src"
    run([sys.executable, ROOT / "bench" / "make_images.py", src, "--count",
         600, "--classes", 2, "--seed", 1, "--min-size", 56, "--max-size",
         64])
    out = run([STOKER, "pack", src, tiny_tmpfs / "ds"], check=False)
    assert out.returncode == 1, out.stderr
    assert (f"no space left on the filesystem of {tiny_tmpfs} (for "
            f"{tiny_tmpfs}/ds): the pack needs about ") in out.stderr, \
        out.stderr
    needed = float(out.stderr.split("needs about ")[1].split(" MB")[0])
    assert 2.1 < needed < 4, out.stderr
    assert list(tiny_tmpfs.iterdir()) == []  # No ds, no ds.tmp-PID.


def test_pack_refuses_at_once_when_the_files_alone_do_not_fit(tmp_path,
                                                              tiny_tmpfs):
    src = tmp_path / "src"
    run([sys.executable, ROOT / "bench" / "make_images.py", src, "--count",
         400, "--classes", 2, "--seed", 1, "--min-size", 96, "--max-size",
         128])
    assert sum(p.stat().st_size for p in src.rglob("*.jpg")) > 2 << 20
    out = run([STOKER, "pack", src, tiny_tmpfs / "ds"], check=False)
    assert out.returncode == 1, out.stderr
    assert "no space left on the filesystem of" in out.stderr, out.stderr
    assert list(tiny_tmpfs.iterdir()) == []


def test_inspect_shows_each_fields_kind_and_the_image_formats(tmp_path):
    src = make_images(tmp_path / "src", 4, classes=2)
    run([STOKER, "pack", src, tmp_path / "ds"])
    info = json.loads(run([STOKER, "inspect", tmp_path / "ds", "--json"]).stdout)
    assert info["format_version"] == 2
    image, label = info["fields"]
    longest = max(p.stat().st_size for p in src.rglob("*.jpg"))
    assert image == {"name": "image", "kind": "image", "max_length": longest,
                     "formats": {"jpeg": 4}}
    assert label == {"name": "label", "kind": "int64"}
    text = run([STOKER, "inspect", tmp_path / "ds"]).stdout
    assert "format   2\n" in text
    assert (f"fields   image (image, max_length {longest}, formats jpeg 4), "
            "label (int64)\n") in text
