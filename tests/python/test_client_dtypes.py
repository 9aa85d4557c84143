"""The Python client's dtypes against the proto: one numpy dtype per
stoker.v1 DType, named as the enum names it, little-endian. The C++ side
(proto, server/tensor, the C++ client) is pinned by
tests/tensor/dtype_pin_test.cc."""
import re

import numpy as np
import pytest

from stoker import errors, transports
from stoker._proto.stoker.v1 import stoker_pb2 as pb
from conftest import ROOT


def proto_dtypes():
    """{name: number} of the DType enum in the .proto file itself, so that
    generated code that was not regenerated shows up here too."""
    text = (ROOT / "proto" / "stoker" / "v1" / "stoker.proto").read_text()
    body = re.search(r"enum DType \{(.*?)\}", text, re.S).group(1)
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"^\s*(DTYPE_\w+) = (\d+);", body, re.M)}


def test_the_generated_enum_matches_the_proto_file():
    assert dict(pb.DType.items()) == proto_dtypes()


def test_every_dtype_has_the_numpy_dtype_of_its_name():
    values = {v for name, v in pb.DType.items() if v != pb.DTYPE_UNSPECIFIED}
    assert set(transports.DTYPES) == values
    for name, value in pb.DType.items():
        if value == pb.DTYPE_UNSPECIFIED:
            continue
        dtype = transports.dtype_of(value)
        assert dtype.name == name[len("DTYPE_"):].lower(), name
        # The wire is little-endian; one-byte types have no byte order.
        assert dtype.byteorder in ("<", "|") or (
            dtype.byteorder == "=" and np.little_endian), (name, dtype.str)
    assert {d.name for d in transports.DTYPES.values()} >= {
        "bool", "uint8", "int8", "uint16", "int16", "int32", "int64",
        "float16", "float32", "float64"}


def test_an_unknown_dtype_is_an_internal_error():
    with pytest.raises(errors.Internal, match="unknown dtype 99"):
        transports.dtype_of(99)


def cpp_dtype_table():
    """{wire number: (name, size)} of the table the daemon and the C++
    client share (proto/dtype_table.h), read from its source."""
    text = (ROOT / "proto" / "dtype_table.h").read_text()
    body = re.search(r"kDTypeTable = \{\{(.*?)\}\};", text, re.S).group(1)
    rows = re.findall(r'\{(\d+), "(\w+)", (\d+)\}', body)
    assert len(rows) == body.count("{"), body
    return {int(wire): (name, int(size)) for wire, name, size in rows}


def test_the_numpy_dtypes_are_the_cpp_table():
    assert {value: (d.name, d.itemsize)
            for value, d in transports.DTYPES.items()} == cpp_dtype_table()
