"""The AutoAugment family's tables and ops against torchvision 0.14's
autoaugment.py (docs/pipeline-design.md §6, "Tables").

augment_space_dump (tests/pipeline/) prints server/pipeline/augment_space's
tables and applies one of its ops with the choice fixed; this file computes
the same from torchvision: `_augmentation_space` of TrivialAugmentWide,
RandAugment and AutoAugment (op order, signs, every magnitude), the
ImageNet policy, and `_apply_op` on the same uint8 images for every op of
each space at policy magnitudes, both signs, nearest without fill and
bilinear with one. Run with -s to print the measured differences.
"""
import json
import subprocess

import numpy as np
import pytest
import torch
from torchvision.transforms import AutoAugment, AutoAugmentPolicy
from torchvision.transforms import InterpolationMode, RandAugment
from torchvision.transforms import TrivialAugmentWide
from torchvision.transforms.autoaugment import _apply_op

from conftest import BUILD
from torch_cpu import TORCH_AVX2

DUMP = BUILD / "tests" / "pipeline" / "augment_space_dump"
WIDTH, HEIGHT, COUNT = 61, 47, 6  # Not square: a swapped size shows.


def torchvision_spaces(bins, height, width):
    return {
        "trivial_augment_wide":
            TrivialAugmentWide()._augmentation_space(bins),
        "rand_augment": RandAugment()._augmentation_space(
            bins, (height, width)),
        "auto_augment": AutoAugment()._augmentation_space(
            bins, (height, width)),
    }


def dumped_table(bins, height, width):
    out = subprocess.run([DUMP, "table", str(bins), str(height), str(width)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


@pytest.mark.parametrize("bins,height,width",
                         [(31, 224, 224), (10, 176, 200), (11, 37, 53),
                          (2, 300, 100)])
def test_tables_equal_torchvisions_augmentation_space(bins, height, width):
    ours = dumped_table(bins, height, width)
    for space, theirs in torchvision_spaces(bins, height, width).items():
        assert [e["op"] for e in ours[space]] == list(theirs), space
        for entry in ours[space]:
            magnitudes, signed = theirs[entry["op"]]
            where = f"{space} {entry['op']} bins {bins}"
            assert entry["signed"] == signed, where
            if magnitudes.ndim == 0:
                assert entry["magnitudes"] is None, where
                continue
            want = magnitudes.double().numpy()
            got = np.array(entry["magnitudes"])
            assert got.shape == want.shape, where
            # Within 2 float32 ulps; bit for bit where torch runs its AVX2
            # kernels, whose rounding augment_space reproduces.
            np.testing.assert_allclose(got, want, rtol=2.5e-7, atol=0,
                                       err_msg=where)
            if TORCH_AVX2:
                np.testing.assert_array_equal(got, want, err_msg=where)


def test_imagenet_policy_equals_torchvisions():
    ours = dumped_table(10, 224, 224)["imagenet_policy"]
    theirs = AutoAugment(AutoAugmentPolicy.IMAGENET).policies
    assert [[tuple(step) for step in sub] for sub in ours] == \
        [[(name, p, bin) for name, p, bin in sub] for sub in theirs]


def images():
    """Photo-like uint8 RGB images, HWC: gradients, blocks, noise."""
    rng = np.random.default_rng(18)
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float64)
    out = []
    for i in range(COUNT):
        img = np.empty((HEIGHT, WIDTH, 3))
        for c in range(3):
            fx, fy = rng.uniform(0.02, 0.2, 2)
            img[..., c] = 128 + 110 * np.sin(fx * x + c) * np.cos(fy * y)
        x0, y0 = rng.integers(0, 30, 2)
        img[y0:y0 + 12, x0:x0 + 20] = rng.uniform(0, 255, 3)
        img += rng.normal(0, 5, img.shape)
        if i == 3:
            img = 90 + img * 0.2  # Low contrast: autocontrast, equalize.
        out.append(np.clip(np.rint(img), 0, 255).astype(np.uint8))
    return np.stack(out)


SOURCE = images()
GEOMETRIC = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"}


def cases():
    """(space, op, bin, num_bins, sign, interpolation, fill) to compare:
    each op of each space at the policies' magnitudes (TA: the top bin and
    a middle one of 31; RA: torchvision's default 9 of 31; AA: bins 8 and
    3 of 10), both signs where signed; the geometric ops also bilinear
    with timm's fill colour."""
    bins_of = {"trivial_augment_wide": (31, [30, 13]),
               "rand_augment": (31, [9]), "auto_augment": (10, [8, 3])}
    out = []
    for space, theirs in torchvision_spaces(31, HEIGHT, WIDTH).items():
        num_bins, bins = bins_of[space]
        for op, (magnitudes, signed) in theirs.items():
            op_bins = bins if magnitudes.ndim > 0 else [-1]
            for b in op_bins:
                for sign in (["+", "-"] if signed else ["+"]):
                    out.append((space, op, b, num_bins, sign, "nearest",
                                None))
                    if op in GEOMETRIC:
                        out.append((space, op, b, num_bins, sign, "bilinear",
                                    [124.0, 116.0, 104.0]))
    return out


def reference(space, op, b, num_bins, sign, interpolation, fill):
    magnitudes, _ = torchvision_spaces(num_bins, HEIGHT, WIDTH)[space][op]
    magnitude = float(magnitudes[b].item()) if b >= 0 else 0.0
    if sign == "-":
        magnitude *= -1.0
    mode = InterpolationMode(interpolation)
    return np.stack([
        _apply_op(torch.from_numpy(img).permute(2, 0, 1).contiguous(), op,
                  magnitude, mode, fill).permute(1, 2, 0).numpy()
        for img in SOURCE])


def test_every_policy_op_equals_torchvisions_apply_op():
    worst = {}
    for case in cases():
        space, op, b, num_bins, sign, interpolation, fill = case
        fill_arg = "none" if fill is None else ",".join(
            str(v) for v in fill)
        out = subprocess.run(
            [DUMP, "apply", space, op, str(b), str(num_bins), sign,
             interpolation, fill_arg, str(WIDTH), str(HEIGHT), str(COUNT)],
            input=SOURCE.tobytes(), check=True, capture_output=True).stdout
        ours = np.frombuffer(out, np.uint8).reshape(SOURCE.shape)
        d = np.abs(ours.astype(np.int32) -
                   reference(*case).astype(np.int32))
        key = (space, op)
        worst[key] = max(worst.get(key, (0, 0)), (float(d.mean()),
                                                  int(d.max())))
        assert d.mean() <= 1.0, case
        # Measured: bit-exact against the AVX2 kernels, 1 level at a few
        # pixels against the others.
        assert d.max() <= (0 if TORCH_AVX2 else 1), case
    print()
    for (space, op), (mad, mx) in sorted(worst.items()):
        print(f"{space} {op}: MAD {mad:.5f}, max {mx}")
