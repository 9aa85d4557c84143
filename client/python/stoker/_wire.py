"""Reads a StreamResponse from the bytes gRPC received, leaving the batch
payload in place.

Parsing a Batch with protobuf copies its payload out of the received bytes
(and reading the `payload` field may copy it again). Instead, the Stream call
is given `parse_response` as its deserializer: it walks the protobuf wire
format of the message's top two levels, parses everything but
Batch.payload with protobuf (a few hundred bytes of metadata), and returns
where the payload lies in the received bytes. Tensors are then numpy views of
those bytes, and the payload is never copied in Python.

A message without payload (an shm batch: slot and layout, a few hundred
bytes; or the header) has nothing to leave in place, and protobuf parses it
whole several times faster than the walk in Python, so it is parsed whole.
"""
from typing import Iterator, List, Optional, Tuple

from ._proto.stoker.v1 import stoker_pb2 as pb

_RESPONSE_HEADER = 1
_RESPONSE_BATCH = 2
_BATCH_PAYLOAD = 15
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


class Response:
    """A parsed StreamResponse: exactly one of `header` and `batch` is set.
    `raw` holds the received bytes; for a batch, raw[payload_offset:
    payload_offset + payload_length] is its payload."""

    __slots__ = ("header", "batch", "raw", "payload_offset", "payload_length")

    def __init__(self, header: Optional[pb.StreamHeader] = None,
                 batch: Optional[pb.Batch] = None, raw: bytes = b"",
                 payload_offset: int = 0, payload_length: int = 0) -> None:
        self.header = header
        self.batch = batch
        self.raw = raw
        self.payload_offset = payload_offset
        self.payload_length = payload_length


class WireError(ValueError):
    pass


def _varint(buf: bytes, pos: int, end: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise WireError("truncated or overlong varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes, pos: int,
            end: int) -> Iterator[Tuple[int, int, int, int, int]]:
    """Yields (field number, wire type, field start, value start, value end)
    for each field in buf[pos:end]; for varints and fixed values the value
    span is the encoded value."""
    while pos < end:
        start = pos
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            _, stop = _varint(buf, pos, end)
        elif wire == _LEN:
            length, pos = _varint(buf, pos, end)
            stop = pos + length
        elif wire == _FIXED64:
            stop = pos + 8
        elif wire == _FIXED32:
            stop = pos + 4
        else:
            raise WireError(f"unsupported wire type {wire}")
        if stop > end:
            raise WireError("field runs past the end of its message")
        yield number, wire, start, pos, stop
        pos = stop


def _parse_batch(raw: bytes, pos: int,
                 end: int) -> Tuple[pb.Batch, Tuple[int, int]]:
    """The Batch in raw[pos:end] without its payload, and the payload span."""
    meta: List[Tuple[int, int]] = []  # Spans of every field but the payload, in order.
    payload = (0, 0)
    for number, wire, start, value, stop in _fields(raw, pos, end):
        if number == _BATCH_PAYLOAD and wire == _LEN:
            payload = (value, stop - value)  # The last one wins.
        else:
            meta.append((start, stop))
    if len(meta) == 1 or (meta and all(
            a[1] == b[0] for a, b in zip(meta, meta[1:]))):
        body = raw[meta[0][0]:meta[-1][1]]
    else:
        body = b"".join(raw[a:b] for a, b in meta)
    return pb.Batch.FromString(body), payload


# Messages up to this size are first parsed whole (see the module comment).
_SMALL = 4096


def parse_response(raw: bytes) -> Response:
    """Deserializer for the Stream call: bytes -> Response."""
    end = len(raw)
    if end <= _SMALL:
        message = pb.StreamResponse.FromString(raw)
        kind = message.WhichOneof("kind")
        if kind == "header":
            return Response(header=message.header, raw=raw)
        if kind == "batch" and not message.batch.payload:
            return Response(batch=message.batch, raw=raw)
    response = Response(raw=raw)
    for number, wire, _, value, stop in _fields(raw, 0, end):
        if wire != _LEN:
            continue
        if number == _RESPONSE_HEADER:
            response.header = pb.StreamHeader.FromString(raw[value:stop])
            response.batch = None
        elif number == _RESPONSE_BATCH:
            response.batch, (offset, length) = _parse_batch(raw, value, stop)
            response.payload_offset, response.payload_length = offset, length
            response.header = None
    return response
