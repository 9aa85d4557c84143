"""`stoker pack` on hostile input: each source is built here, in a temp dir,
the way an adversary would write it, and pack must refuse it by name (or
pack it exactly), never crash, hang or lose a user's files. A regression
that hangs fails on the subprocess timeout instead of stalling the run.
"""
import json
import os
import pickle
import resource
import subprocess
import sys

import lmdb
import pytest

from conftest import STOKER, make_images, run
from test_importers import field, tfrecord, varint, write_lmdb

TIMEOUT = 120


def pack(*args):
    """Runs `stoker pack ARGS` with a timeout; returns the CompletedProcess."""
    return subprocess.run([str(a) for a in [STOKER, "pack", *args]],
                          capture_output=True, text=True, timeout=TIMEOUT)


def leftovers(folder, dst="ds"):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(dst))


def nested_tuples(depth):
    """A protocol 4 pickle of None inside `depth` nested 1-tuples, made by
    bytes (pickle.dumps itself would recurse that deep)."""
    return b"\x80\x04N" + b"\x85" * depth + b"."


def test_deeply_nested_pickles_are_bad_samples_not_a_crash(tmp_path):
    src = make_images(tmp_path / "src", 2, classes=1)
    images = sorted((src / "class_000").iterdir())
    good = [pickle.dumps((p.read_bytes(), 0), protocol=4) for p in images]
    write_lmdb(tmp_path / "deep.lmdb",
               [good[0], nested_tuples(400_000), good[1]])
    out = pack("--from", "efficient-pytorch-lmdb", tmp_path / "deep.lmdb",
               tmp_path / "ds")
    assert out.returncode == 0, (out.returncode, out.stderr)
    assert ("deep.lmdb key 1: pickle: tuples and lists nested more than 100 "
            "deep at byte 103") in out.stdout, out.stdout
    assert json.loads(run([STOKER, "inspect", tmp_path / "ds", "--json"])
                      .stdout)["num_samples"] == 2

    out = pack("--from", "efficient-pytorch-lmdb", tmp_path / "deep.lmdb",
               tmp_path / "ds2", "--on-error", "fail")
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert "deep.lmdb key 1: pickle: tuples and lists nested" in out.stderr
    assert leftovers(tmp_path, "ds2") == []


def test_a_deeply_nested_len_is_refused_by_name(tmp_path):
    write_lmdb(tmp_path / "len.lmdb", [b"x"], length=nested_tuples(400_000))
    out = pack("--from", "efficient-pytorch-lmdb", tmp_path / "len.lmdb",
               tmp_path / "ds")
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert "len.lmdb key __len__: not a msgpack or pickle integer" \
        in out.stderr, out.stderr
    assert leftovers(tmp_path) == []


def test_a_len_beyond_the_entries_is_refused(tmp_path):
    src = make_images(tmp_path / "src", 2, classes=1)
    good = [pickle.dumps((p.read_bytes(), 0), protocol=4)
            for p in sorted((src / "class_000").iterdir())]
    write_lmdb(tmp_path / "big.lmdb", good, length=pickle.dumps(5_000_000))
    out = pack("--from", "efficient-pytorch-lmdb", tmp_path / "big.lmdb",
               tmp_path / "ds")
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert ("big.lmdb key __len__: says 5000000 samples, but the LMDB holds "
            "4 keys in all, __len__ among them") in out.stderr, out.stderr
    assert out.stdout.count("no such key") == 0
    assert leftovers(tmp_path) == []


def test_a_deeply_nested_jsonl_cell_is_a_bad_sample(tmp_path):
    src = make_images(tmp_path / "src", 2, classes=1)
    a, b = sorted((src / "class_000").iterdir())
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "m.jsonl").write_text(
        json.dumps({"image": str(a), "boxes": [[1, 2, 3, 4]]}) + "\n" +
        f'{{"image": "{b}", "boxes": {deep}}}\n')
    fields = ["--field", "image:image", "--field",
              "boxes:ndarray:float32:-1x4"]
    out = pack("--from", "list", tmp_path / "m.jsonl", tmp_path / "ds",
               *fields)
    assert out.returncode == 0, (out.returncode, out.stderr)
    assert ("m.jsonl:2: column 'boxes': JSON nested more than 64 deep"
            in out.stdout), out.stdout
    out = pack("--from", "list", tmp_path / "m.jsonl", tmp_path / "ds2",
               *fields, "--on-error", "fail")
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert "m.jsonl:2: column 'boxes'" in out.stderr, out.stderr
    assert leftovers(tmp_path, "ds2") == []


def test_a_json_array_nested_unlike_its_shape_is_refused(tmp_path):
    src = make_images(tmp_path / "src", 1, classes=1)
    (a,) = sorted((src / "class_000").iterdir())
    (tmp_path / "m.jsonl").write_text(json.dumps(
        {"image": str(a), "boxes": [[1, 2, 3, 4, 5], [6, 7, 8]]}) + "\n")
    out = pack("--from", "list", tmp_path / "m.jsonl", tmp_path / "ds",
               "--field", "image:image", "--field",
               "boxes:ndarray:float32:-1x4", "--on-error", "fail")
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert ("m.jsonl:1: column 'boxes': field 'boxes': a list at depth 2 "
            "holds 5 items where dimension 1 is 4") in out.stderr, out.stderr


@pytest.mark.parametrize("form", ["list", "csv", "jsonl"])
def test_a_fifo_in_a_manifest_is_a_bad_sample_not_a_hang(tmp_path, form):
    src = make_images(tmp_path / "src", 1, classes=1)
    (good,) = sorted((src / "class_000").iterdir())
    fifo = tmp_path / "pipe.jpg"
    os.mkfifo(fifo)
    if form == "list":
        manifest, fields = tmp_path / "m.txt", []
        manifest.write_text(f"{good},0\n{fifo},0\n")
    elif form == "csv":
        manifest = tmp_path / "m.csv"
        fields = ["--field", "image:image", "--field", "label:int64"]
        manifest.write_text(f"image,label\n{good},0\n{fifo},0\n")
    else:
        manifest = tmp_path / "m.jsonl"
        fields = ["--field", "image:image", "--field", "label:int64"]
        manifest.write_text(
            json.dumps({"image": str(good), "label": 0}) + "\n" +
            json.dumps({"image": str(fifo), "label": 0}) + "\n")
    out = pack("--from", "list", manifest, tmp_path / "ds", *fields)
    assert out.returncode == 0, (out.returncode, out.stderr)
    assert "not a regular file" in out.stdout, out.stdout
    assert str(fifo) in out.stdout
    # The manifest itself a FIFO: refused, not waited on.
    os.mkfifo(tmp_path / "m2.csv")
    out = pack("--from", "list", tmp_path / "m2.csv", tmp_path / "ds2",
               *fields)
    assert out.returncode != 0
    assert "not a regular file" in out.stderr, out.stderr


def test_a_tfrecord_number_list_costs_about_its_size(tmp_path):
    src = make_images(tmp_path / "src", 1, classes=1)
    (image,) = sorted((src / "class_000").iterdir())
    # A million int64s of 19 digits: 9 MB as varints, 8 MB packed.
    numbers = [(i * 0x9E3779B97F4A7C15) % 2**63 for i in range(1_000_000)]

    def entry(key, feature):
        return field(1, field(1, key.encode()) + field(2, feature))

    record = field(1, entry("image/encoded",
                            field(1, field(1, image.read_bytes()))) +
                   entry("image/class/label", field(3, field(1, varint(0)))) +
                   entry("ids", field(3, field(1, b"".join(
                       varint(v) for v in numbers)))))
    (tmp_path / "t.tfrecord").write_bytes(tfrecord([record]))
    # The peak RSS of pack alone, measured by a parent of its own.
    measure = ("import resource, subprocess, sys;"
               "rc = subprocess.run(sys.argv[1:]).returncode;"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss);"
               "sys.exit(rc)")
    out = subprocess.run(
        [sys.executable, "-c", measure, str(STOKER), "pack", "--from",
         "tfrecord", str(tmp_path / "t.tfrecord"), str(tmp_path / "ds"),
         "--field", "ids:ndarray:int64:-1", "--threads", "1"],
        capture_output=True, text=True, timeout=TIMEOUT)
    assert out.returncode == 0, out.stderr
    peak_mb = int(out.stdout.strip().splitlines()[-1]) / 1024
    # Through text it took 146 MB and 6.8 s; directly 46 MB and 0.6 s.
    assert peak_mb < 100, peak_mb
    env = lmdb.open(str(tmp_path / "ds" / "shard-00000.lmdb"), subdir=False,
                    readonly=True, lock=False)
    with env.begin() as txn:
        value = bytes(next(iter(txn.cursor()))[1])
    env.close()
    assert value.find(b"".join(v.to_bytes(8, "little")
                               for v in numbers)) > 0


def test_every_sample_bad_counts_each_reason_with_examples(tmp_path):
    write_lmdb(tmp_path / "bad.lmdb",
               [pickle.dumps((b"x", 0), protocol=4)[:12],
                pickle.dumps((b"y", 0), protocol=4)[:13],
                b"\x01junk", pickle.dumps((b"z", 0), protocol=4)[:12]])
    out = pack("--from", "efficient-pytorch-lmdb", tmp_path / "bad.lmdb",
               tmp_path / "ds")
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert "all 4 samples" in out.stderr and "for these reasons:" \
        in out.stderr, out.stderr
    assert "  3 x pickle: truncated at byte #: " in out.stderr, out.stderr
    assert "  1 x neither a pickle" in out.stderr, out.stderr
    assert "bad.lmdb key 2" in out.stderr


def test_a_bad_pax_header_is_named_not_taken_for_no_extension(tmp_path):
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        info = tarfile.TarInfo("a.jpg")
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))
    data = bytearray(buf.getvalue())
    # A pax header of our own before the member: "size=-1".
    record = b"11 size=-1\n"
    header = tarfile.TarInfo("PaxHeader")
    header.type = tarfile.XHDTYPE
    header.size = len(record)
    block = header.tobuf(format=tarfile.USTAR_FORMAT)
    pax = block + record + b"\0" * (512 - len(record))
    (tmp_path / "bad.tar").write_bytes(pax + bytes(data))
    out = pack("--from", "webdataset", tmp_path / "bad.tar", tmp_path / "ds")
    assert out.returncode == 1, (out.returncode, out.stderr)
    assert "no member has a known extension" not in out.stderr, out.stderr
    assert ("bad.tar (tar header at byte 0: pax record size=-1 is not a "
            "number of bytes)") in out.stderr, out.stderr
