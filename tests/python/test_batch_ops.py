"""The batch ops mixup, cutmix and mixup_cutmix through a daemon
(docs/pipeline-design.md §3.4), against torchvision's RandomMixup and
RandomCutmix. torchvision 0.14 ships them only in
references/classification/transforms.py, so their forward() is written out
below with the random draws taken as arguments.

24 PNGs (4 classes) are served through decode_image -> center_crop ->
normalize (float32, mean 0, std 1) -> layout chw, once without a batch op
(`plain`) and once with each. The per-sample generators do not depend on
the batch op, so `plain` gives each batch as it was before mixing. From
the mixed batch's soft labels we read lambda (the weight of a sample's own
class) and, for CutMix, the box from where the images changed; the
reference code on `plain` with that lambda (that box) must give the mixed
images and soft labels. Last, a stream of mixup_cutmix resumed at (epoch,
step) on a daemon restarted after SIGKILL gives the batches of the
uninterrupted stream, byte for byte.
"""
import io
import math
import signal

import numpy as np
import pytest
import torch
from PIL import Image

import stoker
from conftest import STOKER, Daemon, run

W, H, IMAGES, CLASSES, BATCH, SEED, EPOCHS = 20, 14, 24, 4, 6, 5, 3

BASE = ("    - decode_image\n"
        f"    - center_crop: {{size: [{H}, {W}]}}\n"
        "    - normalize: {mean: [0, 0, 0], std: [1, 1, 1]}\n"
        "    - layout: chw\n")
PIPELINES = {
    "plain": "",
    "mix": f"    - mixup: {{alpha: 0.4, num_classes: {CLASSES}}}\n",
    "cut": f"    - cutmix: {{alpha: 1.0, num_classes: {CLASSES}}}\n",
    "both": ("    - mixup_cutmix: {mixup_alpha: 0.8, cutmix_alpha: 1.0, "
             f"num_classes: {CLASSES}, label_smoothing: 0.1}}\n"),
}


# torchvision references/classification/transforms.py (0.14), forward()
# of RandomMixup and RandomCutmix with p = 1, for a float batch [B, C, H,
# W] and int64 targets; `lambda_param` (and CutMix's centre) given instead
# of drawn.
def reference_mixup(batch, target, num_classes, lambda_param):
    batch = batch.clone()
    target = torch.nn.functional.one_hot(
        target, num_classes=num_classes).to(dtype=batch.dtype)
    batch_rolled = batch.roll(1, 0)
    target_rolled = target.roll(1, 0)
    batch_rolled.mul_(1.0 - lambda_param)
    batch.mul_(lambda_param).add_(batch_rolled)
    target_rolled.mul_(1.0 - lambda_param)
    target.mul_(lambda_param).add_(target_rolled)
    return batch, target


def reference_cutmix(batch, target, num_classes, box):
    batch = batch.clone()
    target = torch.nn.functional.one_hot(
        target, num_classes=num_classes).to(dtype=batch.dtype)
    batch_rolled = batch.roll(1, 0)
    target_rolled = target.roll(1, 0)
    _, _, H_, W_ = batch.shape
    x1, y1, x2, y2 = box  # From r_x, r_y and lambda, clamped.
    batch[:, :, y1:y2, x1:x2] = batch_rolled[:, :, y1:y2, x1:x2]
    lambda_param = float(1.0 - (x2 - x1) * (y2 - y1) / (W_ * H_))
    target_rolled.mul_(1.0 - lambda_param)
    target.mul_(lambda_param).add_(target_rolled)
    return batch, target


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    root = tmp_path_factory.mktemp("batchops")
    rng = np.random.default_rng(2)
    for i in range(IMAGES):
        pixels = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, "PNG")
        folder = root / "src" / f"c{i % CLASSES}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"img{i:02d}.png").write_bytes(out.getvalue())
    run([STOKER, "pack", root / "src", root / "data", "--shards", 2])
    socket = root / "s.sock"
    config = root / "stoker.yaml"
    text = (f"listen: {{unix: {socket}}}\nworkers: 2\nmemory_budget: 64MiB\n"
            f"datasets:\n  d: {{path: {root / 'data'}}}\npipelines:\n")
    for name, extra in PIPELINES.items():
        text += f"  {name}:\n{BASE}{extra}"
    config.write_text(text)
    d = Daemon(config, socket).start()
    yield d
    d.stop()


def batches(daemon, pipeline, start=(0, 0)):
    """{(epoch, step): {name: array}} of a whole stream from `start`."""
    out = {}
    client = stoker.Client(daemon.address)
    with client.stream("d", pipeline, batch_size=BATCH, seed=SEED,
                       epochs=EPOCHS, transport="grpc", start=start) as s:
        for batch in s:
            out[(batch.epoch, batch.step)] = {
                name: np.array(batch[name]) for name in
                ("image", "label", "label_soft") if name in batch}
    client.close()
    return out


def lambda_of(labels, soft):
    """lambda, read as the weight of a sample's own class where its
    partner's class differs."""
    for i in range(len(labels)):
        if labels[i] != labels[i - 1]:
            return float(soft[i, labels[i]])
    pytest.fail("every sample of the batch has the same class")


def test_mixup_equals_torchvisions_random_mixup(daemon):
    plain, mixed = batches(daemon, "plain"), batches(daemon, "mix")
    assert plain.keys() == mixed.keys()
    worst_image = worst_label = 0.0
    for key, ours in mixed.items():
        before = plain[key]
        labels = before["label"]
        assert (ours["label"] == labels).all()
        lam = lambda_of(labels, ours["label_soft"])
        assert 0.0 < lam < 1.0
        images, soft = reference_mixup(torch.from_numpy(before["image"]),
                                       torch.from_numpy(labels), CLASSES, lam)
        worst_image = max(worst_image, float(
            np.abs(ours["image"] - images.numpy()).max()))
        worst_label = max(worst_label, float(
            np.abs(ours["label_soft"] - soft.numpy()).max()))
    print(f"\nmixup vs RandomMixup over {len(mixed)} batches: max |diff| "
          f"image {worst_image:.3g}, soft labels {worst_label:.3g}")
    # lambda comes back as a float32 (the soft label), so 1 - lambda may
    # differ from the daemon's by a float32 ulp, and so the sum: values
    # are in [0, 1].
    assert worst_image <= 2.0 ** -22
    assert worst_label <= 2.0 ** -22


def changed_box(before, after):
    """(x1, y1, x2, y2) of the pixels that changed, one box for all
    samples, or None when none did."""
    changed = (before != after).any(axis=(0, 1))  # [H, W]
    if not changed.any():
        return None
    rows = np.flatnonzero(changed.any(axis=1))
    cols = np.flatnonzero(changed.any(axis=0))
    return (int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1)


def test_cutmix_equals_torchvisions_random_cutmix(daemon):
    plain, cut = batches(daemon, "plain"), batches(daemon, "cut")
    boxes = 0
    for key, ours in cut.items():
        before = plain[key]
        labels = before["label"]
        lam = lambda_of(labels, ours["label_soft"])
        box = changed_box(before["image"], ours["image"])
        if box is None:
            assert lam == 1.0
            continue
        boxes += 1
        x1, y1, x2, y2 = box
        # The label weight is the share of the image the sample keeps.
        assert math.isclose(lam, 1 - (x2 - x1) * (y2 - y1) / (W * H),
                            abs_tol=1e-6), key
        # torchvision's box has half sides int(r * side) around a centre
        # in the image: an unclamped side is even.
        if x1 > 0 and x2 < W:
            assert (x2 - x1) % 2 == 0
        if y1 > 0 and y2 < H:
            assert (y2 - y1) % 2 == 0
        images, soft = reference_cutmix(torch.from_numpy(before["image"]),
                                        torch.from_numpy(labels), CLASSES, box)
        assert (ours["image"] == images.numpy()).all(), key
        assert np.abs(ours["label_soft"] - soft.numpy()).max() <= 1e-6, key
    print(f"\ncutmix: {boxes} of {len(cut)} batches pasted a box, each equal "
          "to RandomCutmix's")
    assert boxes >= len(cut) // 2


def test_mixup_cutmix_soft_labels_sum_to_one_smoothed(daemon):
    off, on = 0.1 / CLASSES, 1 - 0.1 + 0.1 / CLASSES
    for key, ours in batches(daemon, "both").items():
        soft = ours["label_soft"]
        assert soft.dtype == np.float32 and soft.shape == (BATCH, CLASSES)
        np.testing.assert_allclose(soft.sum(axis=1), 1.0, atol=1e-6)
        assert soft.min() >= off - 1e-7 and soft.max() <= on + 1e-7


def test_same_position_gives_same_batch_after_a_crash(daemon):
    whole = batches(daemon, "both")
    daemon.signal(signal.SIGKILL)
    daemon.wait()
    daemon.start()
    resumed = batches(daemon, "both", start=(1, 2))
    assert resumed, "the resumed stream delivered nothing"
    assert min(resumed) == (1, 2)
    for key, ours in resumed.items():
        for name, array in ours.items():
            assert array.tobytes() == whole[key][name].tobytes(), (key, name)
    # The batches differ from each other: lambda is drawn per batch.
    lams = {lambda_of(b["label"], b["label_soft"]) for b in whole.values()}
    assert len(lams) > len(whole) // 2
