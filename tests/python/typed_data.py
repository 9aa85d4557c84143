"""The Python twin of tests/testing/dataset_fixture's typed datasets:
`typed_samples` makes the same records as MakeTypedSamples, and
`write_typed_dataset` writes them as WriteTypedDataset does (one LMDB shard,
records framed `u32 count | {u32 len | bytes}* | xxh3-64`, keys the big-endian
sample id, and a format version 2 manifest)."""
import json
import struct
from pathlib import Path
from typing import Any, Dict, List, Tuple

import lmdb
import numpy as np
import xxhash

Schema = List[Dict[str, Any]]
Record = List[bytes]


def record(fields: Record) -> bytes:
    body = struct.pack("<I", len(fields))
    for f in fields:
        body += struct.pack("<I", len(f)) + f
    return body + struct.pack("<Q", xxhash.xxh3_64_intdigest(body))


def typed_samples(n: int) -> Tuple[Schema, List[Record]]:
    """Sample i: tokens int32 [-1] ((5 * i) % 13 of them, 1000 * i + j),
    label int64 i, score float32 i / 4, weight float64 -i / 8, patch uint8
    [2, 3] (i + j), caption str "caption é" + i % 7 letters."""
    records = []
    for i in range(n):
        tokens = np.arange((5 * i) % 13, dtype="<i4") + 1000 * i
        caption = "caption é" + chr(ord("a") + i % 26) * (i % 7)
        records.append([
            tokens.tobytes(), struct.pack("<q", i), struct.pack("<f", i / 4),
            struct.pack("<d", -i / 8),
            bytes((i + j) % 256 for j in range(6)), caption.encode()])
    schema = [
        {"name": "tokens", "kind": "ndarray", "dtype": "int32",
         "shape": [-1],
         "max_length": max(len(r[0]) // 4 for r in records)},
        {"name": "label", "kind": "int64"},
        {"name": "score", "kind": "float32"},
        {"name": "weight", "kind": "float64"},
        {"name": "patch", "kind": "ndarray", "dtype": "uint8",
         "shape": [2, 3]},
        {"name": "caption", "kind": "str",
         "max_length": max(len(r[5]) for r in records)},
    ]
    return schema, records


def write_typed_dataset(out: Path, schema: Schema,
                        records: List[Record]) -> Path:
    out.mkdir(parents=True)
    shard = out / "shard-00000.lmdb"
    size = sum(len(f) + 4096 for r in records for f in r)
    env = lmdb.open(str(shard), subdir=False, lock=False,
                    map_size=((2 * size >> 20) + 2) << 20)
    with env.begin(write=True) as txn:
        for i, r in enumerate(records):
            txn.put(struct.pack(">Q", i), record(r), append=True)
    env.close()
    manifest = {
        "format_version": 2, "name": "typed", "num_samples": len(records),
        "fields": schema,
        "shards": [{"file": shard.name, "first_id": 0,
                    "num_samples": len(records),
                    "bytes": shard.stat().st_size}],
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return out
