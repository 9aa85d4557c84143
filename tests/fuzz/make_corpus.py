#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/.

usage: /usr/bin/python3 tests/fuzz/make_corpus.py [OUT_DIR]

Each target gets a few small, valid inputs of its kind (and one or two
slightly broken ones), so that the fuzzer starts from the formats' real
structure instead of random bytes. The output is deterministic; the corpus
in the tree was made by this script, plus any crashing input a fuzz run
found (those are named crash-*, and the script leaves them alone).
"""
import io
import json
import struct
import sys
import tarfile
import zlib
from pathlib import Path

import xxhash
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "client" / "python"))
from stoker._proto.stoker.v1 import stoker_pb2 as pb  # noqa: E402


def picture(mode, size):
    """A small image with edges and gradients, so every DCT block differs."""
    w, h = size
    img = Image.new("RGB", size)
    img.putdata([((x * 255) // max(1, w - 1), (y * 255) // max(1, h - 1),
                  ((x // 4 + y // 4) % 2) * 255) for y in range(h)
                 for x in range(w)])
    return img.convert(mode)


def jpeg(mode, size, **save):
    out = io.BytesIO()
    picture(mode, size).save(out, "JPEG", **save)
    return out.getvalue()


def jpegs():
    good = jpeg("RGB", (24, 16), quality=50)
    return {
        "rgb-420": good,
        "rgb-444-q90": jpeg("RGB", (17, 9), quality=90, subsampling=0),
        "gray": jpeg("L", (20, 20), quality=60),
        "cmyk": jpeg("CMYK", (16, 12), quality=60),
        "progressive": jpeg("RGB", (33, 21), quality=40, progressive=True),
        "restart-markers": jpeg("RGB", (40, 8), quality=40,
                                restart_marker_blocks=1),
        "tall-1x70": jpeg("RGB", (1, 70), quality=40),
        "truncated": good[: len(good) * 2 // 3],
    }


def png(mode, size, **save):
    out = io.BytesIO()
    img = picture("RGB", size)
    if mode == "P":
        img = img.quantize(16)
        img.info["transparency"] = 3
    elif mode == "I;16":
        img = img.convert("L").point(lambda v: v * 257, "I").convert("I;16")
    else:
        img = img.convert(mode)
    img.save(out, "PNG", **save)
    return out.getvalue()


def png_chunk(kind, data):
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def png_adam7(width, height):
    """An 8-bit RGB Adam7 PNG written by hand: PIL cannot interlace."""
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4),
              (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    raw = b""
    for x0, y0, dx, dy in passes:
        xs = range(x0, width, dx)
        if not xs:
            continue
        for y in range(y0, height, dy):
            raw += b"\0" + bytes(v for x in xs for v in
                                 ((x * 37) & 255, (y * 53) & 255, (x ^ y) & 255))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 1)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) +
            png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b""))


def pngs():
    good = png("RGB", (24, 16))
    return {
        "rgb": good,
        "rgba": png("RGBA", (17, 9)),
        "gray": png("L", (20, 20)),
        "gray-1bit": png("1", (19, 5)),
        "gray-alpha": png("LA", (9, 13)),
        "palette-trns": png("P", (16, 12)),
        "gray-16bit": png("I;16", (11, 7)),
        "adam7": png_adam7(13, 11),
        "tall-1x70": png("RGB", (1, 70)),
        "truncated": good[: len(good) * 2 // 3],
    }


def encoded(fmt, mode, size, **save):
    out = io.BytesIO()
    picture(mode, size).save(out, fmt, **save)
    return out.getvalue()


def images():
    """fuzz_image: the PNGs, and WebP and TIFF files."""
    webp = encoded("WEBP", "RGB", (24, 16), quality=50)
    tiff = encoded("TIFF", "RGB", (17, 9))
    return {
        **pngs(),
        "webp-lossy": webp,
        "webp-lossless-rgba": encoded("WEBP", "RGBA", (9, 13), lossless=True),
        "webp-truncated": webp[: len(webp) * 2 // 3],
        "tiff-rgb": tiff,
        "tiff-lzw-gray": encoded("TIFF", "L", (20, 20), compression="tiff_lzw"),
        "tiff-palette": encoded("TIFF", "P", (16, 12)),
        "tiff-truncated": tiff[: len(tiff) * 2 // 3],
        "tiff-rgba-deflate": encoded("TIFF", "RGBA", (9, 7),
                                     compression="tiff_adobe_deflate"),
    }


def record(fields):
    body = struct.pack("<I", len(fields))
    for f in fields:
        body += struct.pack("<I", len(f)) + f
    return body + struct.pack("<Q", xxhash.xxh3_64_intdigest(body))


def records():
    label = struct.pack("<q", 3)
    img = jpeg("RGB", (8, 8), quality=30)
    body = record([img, label])[:-8]
    return {
        # The first byte picks the mode (record_fuzzer.cc): even, as is.
        "image-label": b"\x00" + record([img, label]),
        "empty-record": b"\x00" + record([]),
        "short-label": b"\x00" + record([img, b"\x01\x02\x03"]),
        "bad-checksum": b"\x00" + record([img, label])[:-1] + b"\x00",
        # Odd: the fuzzer appends the checksum, so the framing is reached.
        "body-image-label": b"\x01" + body,
        "body-bad-length": b"\x01" + struct.pack("<II", 1, 1000) + b"abc",
        "key-42": b"\x00" + struct.pack(">Q", 42),
    }


def manifests():
    shard = {"file": "shard-00000.lmdb", "first_id": 0, "num_samples": 3,
             "bytes": 98304}
    good = {
        "format_version": 1, "name": "train", "num_samples": 5,
        "fields": [{"name": "image", "kind": "bytes",
                    "content_type": "image/jpeg"},
                   {"name": "label", "kind": "int64", "content_type": ""}],
        "classes": ["cat", "dog"],
        "shards": [shard, {"file": "shard-00001.lmdb", "first_id": 3,
                           "num_samples": 2, "bytes": 65536}],
        "created": "2024-05-01T12:00:00Z", "source": "/data/raw/train",
    }
    minimal = {k: v for k, v in good.items()
               if k not in ("classes", "created", "source")}
    gap = json.loads(json.dumps(good))
    gap["shards"][1]["first_id"] = 4
    # Format version 2: typed fields, one of each kind.
    v2 = dict(good, format_version=2, fields=[
        {"name": "image", "kind": "image", "max_length": 48213,
         "formats": {"jpeg": 4, "png": 1}},
        {"name": "label", "kind": "int64"},
        {"name": "weight", "kind": "float32"},
        {"name": "target", "kind": "float64"},
        {"name": "tokens", "kind": "ndarray", "dtype": "int32",
         "shape": [-1], "max_length": 2048},
        {"name": "boxes", "kind": "ndarray", "dtype": "float32",
         "shape": [-1, 4]},
        {"name": "embedding", "kind": "ndarray", "dtype": "float16",
         "shape": [2, 3]},
        {"name": "caption", "kind": "str", "max_length": 311},
        {"name": "raw", "kind": "bytes"}])
    return {
        "good.json": json.dumps(good, indent=2).encode(),
        "every-kind-v2.json": json.dumps(v2, indent=2).encode(),
        "minimal.json": json.dumps(minimal).encode(),
        "gap.json": json.dumps(gap).encode(),
        "escapes.json": json.dumps(dict(good, name="tr\u00e4in\n\"x\"")).encode(),
        "not-an-object.json": b"[1, 2, {\"a\": null}]",
    }


PIPELINE = """\
pipelines:
  train:
    - decode_jpeg: {}
    - random_resized_crop: {size: 224, scale: [0.08, 1], ratio: [0.75, 1.333]}
    - random_flip: {p: 0.5}
    - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], dtype: float16}
    - layout: chw
  val:
    - decode_jpeg: {}
    - resize: {size: 256}
    - center_crop: {size: [224, 200]}
    - normalize: {mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5], dtype: uint8}
    - layout: hwc
"""


def configs():
    # "/" exists everywhere, so a dataset path the loader accepts.
    full = ("listen: {unix: /run/stoker/stoker.sock, tcp: 127.0.0.1:7411, "
            "unix_mode: \"0660\"}\n"
            "workers: auto\nmemory_budget: 2GiB\non_corrupt: fail\n"
            "limits: {max_batch_size: 512, max_prefetch: 8, default_prefetch: 2,"
            " max_streams: 16, max_streams_per_peer: 4, max_batch_bytes: 64MiB}\n"
            "metrics: {listen: 127.0.0.1:9464}\n"
            "datasets:\n  train: {path: /}\n  rel: {path: data/train}\n"
            + PIPELINE)
    return {
        "full.yaml": full.encode(),
        "minimal.yaml": b"listen: {tcp: '[::1]:0'}\nworkers: 2\n"
                        b"datasets: {d: {path: /}}\n"
                        b"pipelines:\n  p: [decode_jpeg, {resize: {size: [8, 8]}}]\n",
        "bad-op.yaml": b"listen: {unix: s.sock}\ndatasets: {d: {path: /}}\n"
                       b"pipelines:\n  p:\n    - blur: {radius: 2}\n",
        "anchors.yaml": b"listen: &l {unix: a.sock}\nmetrics: off\n"
                        b"datasets: {d: {path: /}, e: {path: /}}\n"
                        b"pipelines: {p: &p [decode_jpeg, {center_crop: {size: 4}}], q: *p}\n",
    }


def requests():
    def open_request(**kw):
        start = kw.pop("start", None)
        o = pb.OpenStream(**kw)
        if start:
            o.start.epoch, o.start.step = start
        return pb.StreamRequest(open=o).SerializeToString()
    return {
        "train": open_request(dataset="train", pipeline="train", batch_size=4,
                              seed=7, epochs=2, prefetch=2),
        "ranks": open_request(dataset="train", pipeline="bytes", batch_size=3,
                              rank=1, world_size=3, job_id="job-1",
                              drop_last=True, start=(1, 1), weight=2.5),
        "shm": open_request(dataset="train", pipeline="bytes", batch_size=5,
                            transport=pb.TRANSPORT_SHM, hold=2, epochs=0),
        "unknown-dataset": open_request(dataset="val", pipeline="train",
                                        batch_size=1),
        "ack": pb.StreamRequest(ack=pb.Ack(position=pb.Position(
            epoch=1, step=2))).SerializeToString(),
    }


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def masked_crc(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def tars():
    def tar(fmt, members):
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=fmt) as t:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
        return out.getvalue()
    small = [("0001.jpg", b"\xff\xd8\xff"), ("0001.cls", b"3")]
    long = [("d/" + "k" * 120 + ".jpg", b"x"), ("d/" + "k" * 120 + ".cls",
                                                  b"1")]
    good = tar(tarfile.USTAR_FORMAT, small)
    return {"ustar": good, "gnu-longname": tar(tarfile.GNU_FORMAT, long),
            "pax": tar(tarfile.PAX_FORMAT, long),
            "truncated": good[:700]}


def tfrecords():
    def varint(n):
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(out)

    def fld(number, payload):
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    def entry(key, feature):
        return fld(1, fld(1, key) + fld(2, feature))
    example = fld(1, entry(b"image/encoded", fld(1, fld(1, b"\xff\xd8")))
                  + entry(b"image/class/label", fld(3, fld(1, varint(7))))
                  + entry(b"bbox", fld(2, fld(1, struct.pack("<2f", 0.5,
                                                             1.0)))))

    def frame(data):
        n = struct.pack("<Q", len(data))
        return (n + struct.pack("<I", masked_crc(n)) + data +
                struct.pack("<I", masked_crc(data)))
    # The first byte picks the fuzzer's mode: odd frames the rest itself.
    return {"framed-example": b"\x01" + example,
            "file-two-records": b"\x00" + frame(example) + frame(b""),
            "file-bad-crc": b"\x00" + frame(example)[:-1] + b"\x00"}


def pickles():
    import os
    import pickle

    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))
    out = {f"record-p{p}": pickle.dumps((b"\xff\xd8ab", 7), protocol=p)
           for p in (2, 3, 4, 5)}
    out["keys-p4"] = pickle.dumps([b"0", b"1"], protocol=4)
    out["big-label-p5"] = pickle.dumps((b"x", 2**40), protocol=5)
    out["evil-p4"] = pickle.dumps(Evil(), protocol=4)
    # Nesting by bytes (pickle.dumps would recurse): tuples one past the
    # reader's bound of 100, lists at it.
    out["nested-tuples-101"] = b"\x80\x04N" + b"\x85" * 101 + b"."
    out["nested-lists-100"] = (b"\x80\x04" + b"]" * 100 + b"N" + b"a" * 100 +
                               b".")
    return out


def msgpacks():
    # Hand-encoded: msgpack.packb([{b'data': b'jpg'}, 3]) and friends.
    return {"record-bin": b"\x92\x81\xc4\x04data\xc4\x03jpg\x03",
            "record-str": b"\x92\x81\xa4data\xa3jpg\x03",
            "len": b"\xcd\x01\x00",
            "nested": b"\x91\x91\x92\xcb" + struct.pack(">d", 0.5) + b"\xc0"}


def npys():
    import numpy as np

    def save(a):
        out = io.BytesIO()
        np.save(out, a)
        return out.getvalue()
    return {"f32-2x3": save(np.zeros((2, 3), np.float32)),
            "i64-scalar": save(np.int64(5)),
            "u8-empty": save(np.zeros((0, 4), np.uint8)),
            "fortran": save(np.asfortranarray(np.zeros((2, 3)))),
            "v2-header": b"\x93NUMPY\x02\x00" + struct.pack("<I", 60) +
            b"{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }"
            .ljust(59) + b"\n" + b"\0" * 4,
            "repeated-key": b"\x93NUMPY\x01\x00" + struct.pack("<H", 86) +
            b"{'descr': '<i4', 'fortran_order': False, 'fortran_order': True, "
            b"'shape': (1,), }".ljust(85) + b"\n" + b"\0" * 4}


def payloads():
    # Two bytes of claimed size (in units of 64 bytes), then the encoding
    # (proto/payload_codec.h). A block stored as it is needs no zstd here:
    # 128 bytes, then the trailer: its stored size, the block size, one block.
    body = bytes(range(128))
    stored = body + struct.pack("<III", 128, 1 << 20, 1)
    return {"stored-block": b"\x00\x02" + stored,
            "pattern": b"\x00\x01" + b"abcd" * 16,
            "short": b"\x00\x00\x01"}


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "corpus"
    for target, seeds in [("fuzz_jpeg", jpegs()), ("fuzz_image", images()),
                          ("fuzz_record", records()),
                          ("fuzz_manifest", manifests()),
                          ("fuzz_config", configs()),
                          ("fuzz_request", requests()),
                          ("fuzz_tar", tars()), ("fuzz_tfrecord", tfrecords()),
                          ("fuzz_pickle", pickles()),
                          ("fuzz_msgpack", msgpacks()), ("fuzz_npy", npys()),
                          ("fuzz_payload", payloads())]:
        d = out / target
        d.mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            (d / name).write_bytes(data)
        print(f"{d}: {len(seeds)} seeds")


if __name__ == "__main__":
    main()
