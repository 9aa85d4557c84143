"""Several spatial fields end to end (docs/pipeline-design.md §2.1): a
segmentation-style dataset, an image and a PNG mask per sample, through a
stokerd with random_resized_crop + random_flip (and rotate), over grpc and
shm. The pictures encode their own coordinates: image pixel (x, y) is
(x, y, 0), mask pixel (x, y) is (x, y, 255 * ((x + y) & 1)). So a delivered
mask pixel is a real source pixel (not an average) when its blue is the
parity of its red and green, and it lies where the image pixel beside it
came from when their red and green agree within one output pixel. A mask of
another size than its image is that sample's DataLoss, naming the dataset,
shard, key, both fields and both sizes."""

import io
import json
import struct

import numpy as np
import pytest
from PIL import Image

import stoker
from conftest import STOKER, Daemon, run, write_config
from typed_data import write_typed_dataset

N = 24
OUT = 32
MISMATCHED = 5

PIPELINES = f"""\
  seg:
    - decode_image: {{field: image}}
    - decode_image: {{field: mask, interpolation: nearest}}
    - random_resized_crop: {{size: {OUT}}}
    - random_flip: {{}}
  segrot:
    - decode_image: {{field: image}}
    - decode_image: {{field: mask, interpolation: nearest}}
    - random_resized_crop: {{size: {OUT}}}
    - random_flip: {{}}
    - rotate: {{degrees: 40}}
  segbilinear:
    - decode_image: {{field: image}}
    - decode_image: {{field: mask}}
    - random_resized_crop: {{size: {OUT}}}
    - random_flip: {{}}
  segnorm:
    - decode_image: {{field: image}}
    - decode_image: {{field: mask, interpolation: nearest}}
    - random_resized_crop: {{size: {OUT}}}
    - random_flip: {{}}
    - normalize: {{mean: [0.5, 0.5, 0.5], std: [0.25, 0.25, 0.25], dtype: float32}}
    - layout: chw
"""


def coordinate_png(width, height, checkerboard):
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.zeros((height, width, 3), np.uint8)
    rgb[..., 0] = x
    rgb[..., 1] = y
    if checkerboard:
        rgb[..., 2] = 255 * ((x + y) & 1)
    out = io.BytesIO()
    Image.fromarray(rgb, "RGB").save(out, format="PNG")
    return out.getvalue()


def serve(tmp_path, mismatch=False, on_corrupt="skip"):
    records = []
    for i in range(N):
        w, h = 120 + 5 * i, 200 - 3 * i
        mask_h = h + 1 if mismatch and i == MISMATCHED else h
        records.append([coordinate_png(w, h, False),
                         coordinate_png(w, mask_h, True),
                         struct.pack("<q", i)])
    schema = [
        {"name": "image", "kind": "image",
         "max_length": max(len(r[0]) for r in records)},
        {"name": "mask", "kind": "image",
         "max_length": max(len(r[1]) for r in records)},
        {"name": "label", "kind": "int64"},
    ]
    data = write_typed_dataset(tmp_path / "seg", schema, records)
    socket = tmp_path / "stoker.sock"
    config = write_config(tmp_path / "stoker.yaml", data, socket,
                          PIPELINES + f"on_corrupt: {on_corrupt}\n")
    return Daemon(config, socket).start()


@pytest.fixture
def daemon(tmp_path):
    d = serve(tmp_path)
    yield d
    d.stop()


def worst_mismatch(image, mask):
    """Largest distance, in output pixels, between where a mask pixel and
    the image pixel beside it came from; asserts every mask pixel is a
    real one."""
    image = image.astype(int)
    assert real_pixels(mask)
    mask = mask.astype(int)
    assert (image[..., 2] == 0).all()
    mid = OUT // 2
    step_x = max(abs(image[mid, -1, 0] - image[mid, 0, 0]) / (OUT - 1), 1.0)
    step_y = max(abs(image[-1, mid, 1] - image[0, mid, 1]) / (OUT - 1), 1.0)
    dx = np.maximum(np.abs(mask[..., 0] - image[..., 0]) - 0.5, 0) / step_x
    dy = np.maximum(np.abs(mask[..., 1] - image[..., 1]) - 0.5, 0) / step_y
    return float(max(dx.max(), dy.max()))


def read(daemon, pipeline, transport):
    client = stoker.Client(daemon.address)
    out = {}
    with client.stream("train", pipeline, batch_size=8, seed=11,
                       transport=transport) as s:
        for batch in s:
            for k, i in enumerate(batch.sample_ids):
                out[i] = (np.array(batch["image"][k]),
                          np.array(batch["mask"][k]),
                          int(batch["label"][k]))
            batch.release()
    return out


@pytest.mark.parametrize("transport", ["grpc", "shm"])
def test_mask_follows_the_image_through_crop_and_flip(daemon, transport):
    got = read(daemon, "seg", transport)
    assert sorted(got) == list(range(N))
    flipped = 0
    for i, (image, mask, label) in got.items():
        assert label == i
        assert image.shape == mask.shape == (OUT, OUT, 3)
        assert mask.dtype == np.uint8
        assert worst_mismatch(image, mask) <= 1.0, i
        flipped += int(image[OUT // 2, -1, 0]) < int(image[OUT // 2, 0, 0])
    assert 0 < flipped < N


def real_pixels(mask):
    mask = mask.astype(int)
    return bool((mask[..., 2] == 255 * ((mask[..., 0] + mask[..., 1]) & 1))
                .all())


def test_the_check_sees_a_mask_rendered_with_averaging(daemon):
    # The same mask decoded as an image (bilinear, box-averaged): the
    # checkerboard blurs, so the parity check above would catch a mask
    # that the pipeline averaged.
    got = read(daemon, "segbilinear", "grpc")
    assert sum(not real_pixels(mask) for _, mask, _ in got.values()) > N // 2


def test_mask_follows_the_image_through_rotate(daemon):
    plain = read(daemon, "seg", "grpc")
    rotated = read(daemon, "segrot", "grpc")
    moved = 0
    for i, (image, mask, _) in rotated.items():
        assert worst_mismatch(image, mask) <= 1.0, i
        moved += not np.array_equal(mask, plain[i][1])
    assert moved > N * 3 // 4


def test_normalize_applies_to_the_image_and_the_mask_stays_uint8(daemon):
    plain = read(daemon, "seg", "grpc")
    norm = read(daemon, "segnorm", "grpc")
    for i, (image, mask, _) in norm.items():
        assert image.dtype == np.float32 and image.shape == (3, OUT, OUT)
        assert mask.dtype == np.uint8 and mask.shape == (3, OUT, OUT)
        np.testing.assert_array_equal(mask.transpose(1, 2, 0), plain[i][1])
        want = (plain[i][0].transpose(2, 0, 1) / 255.0 - 0.5) / 0.25
        np.testing.assert_allclose(image, want.astype(np.float32), rtol=0,
                                   atol=1e-6)


def test_a_mask_of_another_size_is_data_loss_naming_both(tmp_path):
    d = serve(tmp_path, mismatch=True, on_corrupt="fail")
    try:
        out = run([STOKER, "stream", "--address", d.address, "--dataset",
                   "train", "--pipeline", "seg", "--batch-size", 4,
                   "--epochs", 1, "--json", "--quiet"], check=False)
    finally:
        d.stop()
    status = json.loads(out.stdout.strip().splitlines()[-1])["status"]
    assert out.returncode == 1
    assert status.startswith("DATA_LOSS"), status
    w, h = 120 + 5 * MISMATCHED, 200 - 3 * MISMATCHED
    for part in ("dataset 'train': shard shard-00000.lmdb",
                 f"key {MISMATCHED}: ",
                 f"field 'mask' is {w}x{h + 1}, 'image' is {w}x{h}"):
        assert part in status, (part, status)


def test_a_mismatched_sample_is_skipped_under_on_corrupt_skip(tmp_path):
    d = serve(tmp_path, mismatch=True, on_corrupt="skip")
    try:
        client = stoker.Client(d.address)
        ids, skipped = [], []
        with client.stream("train", "seg", batch_size=8, seed=2) as s:
            for batch in s:
                ids += batch.sample_ids
                skipped += batch.skipped_ids
                batch.release()
    finally:
        d.stop()
    assert skipped == [MISMATCHED]
    assert sorted(ids + skipped) == list(range(N))
