"""`stoker pack --from KIND`: the same photos from every source format give
the same dataset, byte for byte as the daemon serves it; foreign formats
are parsed by readers that cannot run code.

The inputs are made here: tar shards with Python's tarfile, TFRecords with
a writer of our own (crc32c computed in Python), Efficient-PyTorch LMDBs
with the lmdb, msgpack and pickle modules.
"""
import io
import json
import os
import pickle
import struct
import tarfile

import lmdb
import msgpack
import numpy as np
import pytest

from conftest import STOKER, Daemon, TRAIN_PIPELINE, make_images, run

# --- Writers of the foreign formats --------------------------------------


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


CRC_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number, payload):
    """A length-delimited protobuf field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def example(features):
    """A serialized tf.train.Example of {key: bytes | int | [float]}."""
    entries = b""
    for key, value in features.items():
        if isinstance(value, bytes):
            feature = field(1, field(1, value))  # bytes_list
        elif isinstance(value, int):
            feature = field(3, field(1, varint(value & (2**64 - 1))))  # packed
        else:
            feature = field(2, field(1, struct.pack(f"<{len(value)}f",
                                                    *value)))
        entries += field(1, field(1, key.encode()) + field(2, feature))
    return field(1, entries)


def tfrecord(records):
    out = b""
    for data in records:
        length = struct.pack("<Q", len(data))
        out += (length + struct.pack("<I", masked_crc(length)) + data +
                struct.pack("<I", masked_crc(data)))
    return out


def write_lmdb(path, values, length=None):
    env = lmdb.open(str(path), subdir=False, map_size=64 << 20)
    with env.begin(write=True) as txn:
        for i, v in enumerate(values):
            txn.put(str(i).encode(), v)
        keys = [str(i).encode() for i in range(len(values))]
        txn.put(b"__keys__", pickle.dumps(keys))
        txn.put(b"__len__", length if length is not None
                else pickle.dumps(len(keys)))
    env.close()


def folder_samples(src):
    """(bytes, label) of an ImageFolder, in the order pack numbers them."""
    samples = []
    for label, cls in enumerate(sorted(p for p in src.iterdir())):
        for f in sorted(cls.rglob("*")):
            samples.append((f.read_bytes(), label))
    return samples


# --- Tests ----------------------------------------------------------------


def serve(tmp_path, datasets):
    socket = tmp_path / "stoker.sock"
    config = tmp_path / "stoker.yaml"
    config.write_text(
        f"listen: {{unix: {socket}}}\nworkers: 2\nmemory_budget: 64MiB\n"
        "datasets:\n" +
        "".join(f"  {n}: {{path: {p}}}\n" for n, p in datasets.items()) +
        "pipelines:\n" + TRAIN_PIPELINE)
    return Daemon(config, socket).start()


def digest(daemon, dataset):
    out = run([STOKER, "stream", "--address", daemon.address, "--dataset",
               dataset, "--pipeline", "train", "--batch-size", 4, "--seed", 7,
               "--epochs", 1, "--json", "--quiet"])
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["samples"] == 12
    return result["content_digest"]


def test_every_format_packs_the_same_photos_into_the_same_dataset(tmp_path):
    src = make_images(tmp_path / "src", 12, classes=3)
    samples = folder_samples(src)
    made = {}

    # WebDataset: two shards in a folder, keys in a subfolder.
    wds = tmp_path / "wds"
    wds.mkdir()
    for shard, part in enumerate((samples[:5], samples[5:])):
        with tarfile.open(wds / f"train-{shard:03d}.tar", "w",
                          format=tarfile.GNU_FORMAT) as tar:
            for i, (image, label) in enumerate(part):
                # Beyond ustar's 100 bytes: GNU long-name entries.
                key = f"n{shard}/" + "x" * 100 + f"{i:06d}"
                for ext, data in (("jpg", image), ("cls", b"%d" % label)):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    made["wds"] = ["--from", "webdataset", wds]
    made["wds_glob"] = ["--from", "webdataset", wds / "train-*.tar"]

    # TFRecords: two files, ImageNet's feature names.
    tfr = tmp_path / "tfr"
    tfr.mkdir()
    for shard, part in enumerate((samples[:7], samples[7:])):
        (tfr / f"train-{shard:05d}-of-00002").write_bytes(tfrecord(
            example({"image/encoded": image, "image/class/label": label,
                     "image/format": b"JPEG"}) for image, label in part))
    made["tfr"] = ["--from", "tfrecord", tfr]

    # Efficient-PyTorch LMDBs: msgpack, and pickle at protocols 2 and 5.
    write_lmdb(tmp_path / "mp.lmdb",
               [msgpack.packb([{b"data": i}, l]) for i, l in samples],
               length=msgpack.packb(len(samples)))
    made["mp"] = ["--from", "efficient-pytorch-lmdb", tmp_path / "mp.lmdb"]
    for proto in (2, 5):
        write_lmdb(tmp_path / f"pk{proto}.lmdb",
                   [pickle.dumps((i, l), protocol=proto) for i, l in samples])
        made[f"pk{proto}"] = ["--from", "efficient-pytorch-lmdb",
                              tmp_path / f"pk{proto}.lmdb"]

    datasets = {"folder": tmp_path / "ds-folder"}
    run([STOKER, "pack", src, datasets["folder"]])
    for name, args in made.items():
        datasets[name] = tmp_path / f"ds-{name}"
        run([STOKER, "pack", *args, datasets[name]])
        info = json.loads(run([STOKER, "inspect", datasets[name],
                               "--json"]).stdout)
        assert info["num_samples"] == 12, name
        assert [f["name"] for f in info["fields"]] == ["image", "label"]
    daemon = serve(tmp_path, datasets)
    try:
        digests = {name: digest(daemon, name) for name in datasets}
    finally:
        daemon.stop()
    assert len(set(digests.values())) == 1, digests


def test_a_pickle_that_would_run_code_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    src = make_images(tmp_path / "src", 3, classes=1)
    good = [pickle.dumps((i, l), protocol=4) for i, l in folder_samples(src)]
    evil = pickle.dumps((Evil(), 0), protocol=4)
    evil2 = pickle.dumps(Evil(), protocol=2)
    write_lmdb(tmp_path / "evil.lmdb", [good[0], evil, good[1], evil2])

    out = run([STOKER, "pack", "--from", "efficient-pytorch-lmdb",
               tmp_path / "evil.lmdb", tmp_path / "ds", "--on-error", "fail"],
              check=False)
    assert out.returncode == 1
    assert "evil.lmdb key 1" in out.stderr, out.stderr
    assert "STACK_GLOBAL is refused" in out.stderr, out.stderr
    assert not (tmp_path / "ds").exists()

    out = run([STOKER, "pack", "--from", "efficient-pytorch-lmdb",
               tmp_path / "evil.lmdb", tmp_path / "ds"])
    assert "evil.lmdb key 1: pickle: opcode STACK_GLOBAL" in out.stdout
    assert "evil.lmdb key 3: pickle: opcode GLOBAL" in out.stdout
    info = json.loads(run([STOKER, "inspect", tmp_path / "ds",
                           "--json"]).stdout)
    assert info["num_samples"] == 2
    assert not marker.exists()
    # Unpickling it for real would have run the command: the test can fail.
    pickle.loads(evil2)
    assert marker.exists()


def test_a_pyarrow_lmdb_is_refused_with_a_note_to_convert(tmp_path):
    # pyarrow.serialize's framing: three int32 counts, padding, then an
    # Arrow IPC stream starting with its continuation marker.
    value = struct.pack("<iii", 0, 0, 1) + b"\0" * 4 + b"\xff" * 4 + b"\0" * 40
    write_lmdb(tmp_path / "pa.lmdb", [value], length=value)
    out = run([STOKER, "pack", "--from", "efficient-pytorch-lmdb",
               tmp_path / "pa.lmdb", tmp_path / "ds"], check=False)
    assert out.returncode == 1
    assert "pa.lmdb key __len__" in out.stderr
    assert "pyarrow.serialize()" in out.stderr and "convert" in out.stderr


def test_a_tfrecord_with_a_bad_crc_is_named_by_file_and_offset(tmp_path):
    src = make_images(tmp_path / "src", 3, classes=1)
    records = [example({"image/encoded": i, "image/class/label": l,
                        "image/object/bbox/xmin": [0.5, 0.25 * l]})
               for i, l in folder_samples(src)]
    data = bytearray(tfrecord(records))
    second = 12 + len(records[0]) + 4
    data[second + 12 + 40] ^= 0xFF  # Inside the second record's data.
    (tmp_path / "t.tfrecord").write_bytes(bytes(data))
    out = run([STOKER, "pack", "--from", "tfrecord", tmp_path / "t.tfrecord",
               tmp_path / "ds", "--on-error", "fail"], check=False)
    assert out.returncode == 1
    assert f"t.tfrecord@{second}" in out.stderr, out.stderr
    assert "data CRC mismatch" in out.stderr
    out = run([STOKER, "pack", "--from", "tfrecord", tmp_path / "t.tfrecord",
               tmp_path / "ds", "--field",
               "xmin=image/object/bbox/xmin:ndarray:float32:-1"])
    assert f"t.tfrecord@{second}: record at byte {second}: data CRC " \
           "mismatch" in out.stdout
    run([STOKER, "verify", tmp_path / "ds", "--decode"])
    assert "xmin (ndarray float32 [-1], max_length 2)" in run(
        [STOKER, "inspect", tmp_path / "ds"]).stdout
    got = read_records(tmp_path / "ds")
    assert len(got) == 2
    assert np.frombuffer(got[1][2], np.float32).tolist() == [0.5, 0.0]


def read_records(ds):
    """Every record of a packed dataset, as lists of field bytes."""
    records = []
    for shard in sorted(ds.glob("shard-*.lmdb")):
        env = lmdb.open(str(shard), subdir=False, readonly=True, lock=False)
        with env.begin() as txn:
            for _, v in txn.cursor():
                (count,), at, fields = struct.unpack_from("<I", v), 4, []
                for _ in range(count):
                    (n,) = struct.unpack_from("<I", v, at)
                    fields.append(bytes(v[at + 4:at + 4 + n]))
                    at += 4 + n
                records.append(fields)
        env.close()
    return records


TYPED = ["--field", "image:image", "--field", "label:int64",
         "--field", "score:float32", "--field", "tokens:ndarray:int32:-1",
         "--field", "caption:str"]


@pytest.mark.parametrize("form", ["csv", "jsonl"])
def test_typed_columns_round_trip(tmp_path, form):
    src = make_images(tmp_path / "src", 3, classes=1)
    paths = sorted((src / "class_000").iterdir())
    rows = [(paths[i].relative_to(tmp_path), i, 0.25 * i, list(range(i + 1)),
             f"a, \"quoted\" caption {i}") for i in range(3)]
    if form == "csv":
        lines = ["caption,image,tokens,label,score,unused"]
        for p, l, s, t, c in rows:
            quoted = c.replace('"', '""')
            lines.append(f'"{quoted}",{p},"{" ".join(map(str, t))}",{l},'
                         f"{s},x")
        manifest = tmp_path / "m.csv"
        manifest.write_text("\n".join(lines) + "\n")
    else:
        manifest = tmp_path / "m.jsonl"
        manifest.write_text("".join(json.dumps(
            {"image": str(p), "label": l, "score": s, "tokens": t,
             "caption": c}) + "\n" for p, l, s, t, c in rows))
    run([STOKER, "pack", "--from", "list", manifest, tmp_path / "ds", *TYPED])
    run([STOKER, "verify", tmp_path / "ds"])
    text = run([STOKER, "inspect", tmp_path / "ds"]).stdout
    assert "label (int64)" in text and "score (float32)" in text
    assert "tokens (ndarray int32 [-1], max_length 3)" in text, text
    assert "caption (str" in text
    got = read_records(tmp_path / "ds")
    assert len(got) == 3
    for (p, l, s, t, c), rec in zip(rows, got):
        assert rec[0] == (tmp_path / p).read_bytes()
        assert struct.unpack("<q", rec[1])[0] == l
        assert struct.unpack("<f", rec[2])[0] == s
        assert np.frombuffer(rec[3], np.int32).tolist() == t
        assert rec[4].decode() == c


def test_a_bad_cell_names_file_line_and_column(tmp_path):
    src = make_images(tmp_path / "src", 2, classes=1)
    a, b = sorted((src / "class_000").iterdir())
    (tmp_path / "m.csv").write_text(f"image,label\n{a},1\n{b},one\n")
    out = run([STOKER, "pack", "--from", "list", tmp_path / "m.csv",
               tmp_path / "ds", "--field", "image:image", "--field",
               "label:int64", "--on-error", "fail"], check=False)
    assert out.returncode == 1
    assert "m.csv:3: column 'label': field 'label': 'one' is not an int64" \
        in out.stderr, out.stderr


def npy(arr, fortran=False):
    buf = io.BytesIO()
    np.save(buf, np.asfortranarray(arr) if fortran else arr)
    return buf.getvalue()


def test_webdataset_npy_json_and_txt_members_become_typed_fields(tmp_path):
    src = make_images(tmp_path / "src", 3, classes=1)
    tar_path = tmp_path / "s.tar"
    boxes = [np.arange(4 * (i + 1), dtype=np.float32).reshape(-1, 4)
             for i in range(3)]
    with tarfile.open(tar_path, "w", format=tarfile.PAX_FORMAT) as tar:
        for i, (image, label) in enumerate(folder_samples(src)):
            long_key = "k" * 120 + f"{i}"  # Beyond ustar's 100 bytes.
            members = {"png" if i == 1 else "jpg": image, "cls": b"%d" % label,
                       "json": json.dumps({"i": i}).encode(),
                       "txt": f"caption {i}".encode(), "npy": npy(boxes[i])}
            if i == 2:
                members["npy"] = npy(np.ones((2, 4), np.float32).T, True)
            for ext, data in members.items():
                info = tarfile.TarInfo(f"{long_key}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    out = run([STOKER, "pack", "--from", "webdataset", tar_path,
               tmp_path / "ds", "--field", "caption=txt:str"])
    # The Fortran-order array is refused, not transposed.
    assert "fortran_order arrays are not supported" in out.stdout
    text = run([STOKER, "inspect", tmp_path / "ds"]).stdout
    assert "npy (ndarray float32 [-1, 4], max_length 2)" in text, text
    assert "json (str" in text and "caption (str" in text  # txt, renamed.
    got = read_records(tmp_path / "ds")
    assert len(got) == 2
    # image, label, then json, npy, txt.
    assert json.loads(got[1][2]) == {"i": 1}
    assert np.frombuffer(got[1][3], np.float32).tolist() == \
        boxes[1].ravel().tolist()
    assert got[1][4] == b"caption 1"
