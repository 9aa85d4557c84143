"""random_erasing's boxes against torchvision's RandomErasing.get_params
(docs/pipeline-design.md §3.3).

16 PNGs of 48x24 are served through decode_image -> center_crop ->
normalize (mean 0, std 1: every value in [0, 1]) -> layout chw ->
random_erasing {p: 1, value: [9], ratio: [1.5, 4]} (tall boxes, so a swapped
height and width shows) for 125 epochs (2,000 draws); each box is
where the output is 9. torchvision draws 2,000 boxes with get_params on an
image of the same size. The height, width, area and position of the boxes
(and how often no box fits) must come from the same distribution: a
chi-squared test of homogeneity per quantity at p = 0.001.
"""
import io

import numpy as np
import pytest
import torch
from PIL import Image
from scipy.stats import chi2_contingency
from torchvision.transforms import RandomErasing

import stoker
from conftest import STOKER, Daemon, run

W, H, IMAGES, EPOCHS = 48, 24, 16, 125


@pytest.fixture(scope="module")
def boxes(tmp_path_factory):
    root = tmp_path_factory.mktemp("erasing")
    rng = np.random.default_rng(1)
    for i in range(IMAGES):
        pixels = rng.integers(20, 230, (H, W, 3), dtype=np.uint8)
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, "PNG")
        (root / "src" / f"c{i:02d}").mkdir(parents=True)
        (root / "src" / f"c{i:02d}" / "img.png").write_bytes(out.getvalue())
    run([STOKER, "pack", root / "src", root / "data", "--shards", 1])
    socket = root / "s.sock"
    config = root / "stoker.yaml"
    config.write_text(
        f"listen: {{unix: {socket}}}\nworkers: 2\nmemory_budget: 64MiB\n"
        f"datasets:\n  d: {{path: {root / 'data'}}}\n"
        "pipelines:\n  erase:\n    - decode_image\n"
        f"    - center_crop: {{size: [{H}, {W}]}}\n"
        "    - normalize: {mean: [0, 0, 0], std: [1, 1, 1]}\n"
        "    - layout: chw\n"
        "    - random_erasing: {p: 1, value: [9], ratio: [1.5, 4]}\n")
    daemon = Daemon(config, socket).start()
    found = []
    try:
        client = stoker.Client(daemon.address)
        with client.stream("d", "erase", batch_size=IMAGES, seed=3,
                           epochs=EPOCHS, transport="grpc") as s:
            for batch in s:
                for image in np.array(batch["image"]):
                    erased = image[0] == 9.0
                    if not erased.any():
                        found.append(None)
                        continue
                    rows = np.flatnonzero(erased.any(axis=1))
                    cols = np.flatnonzero(erased.any(axis=0))
                    top, left = rows[0], cols[0]
                    h, w = len(rows), len(cols)
                    # One solid rectangle, filled in every channel.
                    assert (image[:, top:top + h, left:left + w] == 9.0).all()
                    assert erased.sum() == h * w
                    found.append((top, left, h, w))
    finally:
        daemon.stop()
    assert len(found) == IMAGES * EPOCHS
    return found


def torchvision_boxes(count):
    torch.manual_seed(0)
    image = torch.zeros(3, H, W)
    out = []
    for _ in range(count):
        i, j, h, w, _ = RandomErasing.get_params(
            image, scale=(0.02, 0.33), ratio=(1.5, 4.0), value=[9.0])
        # No fit returns the whole image; a 0-pixel box erases nothing.
        out.append(None if (h, w) == (H, W) or h == 0 or w == 0
                   else (i, j, h, w))
    return out


def homogeneity_p(ours, theirs, edges):
    """p of a chi-squared test that two samples share a distribution,
    binned by `edges` (the last bin open)."""
    table = [np.histogram(sample, bins=edges)[0] for sample in (ours, theirs)]
    table = np.array(table)
    table = table[:, table.sum(axis=0) > 0]
    return chi2_contingency(table)[1]


def test_boxes_follow_torchvisions_get_params(boxes):
    theirs = torchvision_boxes(len(boxes))
    none_ours = sum(b is None for b in boxes)
    none_theirs = sum(b is None for b in theirs)
    ours = np.array([b for b in boxes if b is not None], dtype=float)
    ref = np.array([b for b in theirs if b is not None], dtype=float)
    print(f"\nno box: ours {none_ours}, torchvision {none_theirs} of "
          f"{len(boxes)}")
    if none_ours + none_theirs:
        p_none = chi2_contingency(
            [[none_ours, len(boxes) - none_ours],
             [none_theirs, len(theirs) - none_theirs]])[1]
        assert p_none > 0.001
    quantities = {
        "h": (ours[:, 2], ref[:, 2]),
        "w": (ours[:, 3], ref[:, 3]),
        "area": (ours[:, 2] * ours[:, 3], ref[:, 2] * ref[:, 3]),
        # Where the box starts, as a fraction of the room it has.
        "top": (ours[:, 0] / (H - ours[:, 2]), ref[:, 0] / (H - ref[:, 2])),
        "left": (ours[:, 1] / (W - ours[:, 3]), ref[:, 1] / (W - ref[:, 3])),
    }
    for name, (a, b) in quantities.items():
        pooled = np.concatenate([a, b])
        edges = np.unique(np.quantile(pooled, np.linspace(0, 1, 11)))
        edges[-1] += 1e-9
        p = homogeneity_p(a, b, edges)
        print(f"{name}: mean ours {a.mean():.3f}, torchvision "
              f"{b.mean():.3f}, p {p:.3f}")
        assert p > 0.001, name
    # Every box keeps inside the image, strictly smaller than it.
    assert (ours[:, 2] < H).all() and (ours[:, 3] < W).all()
    assert (ours[:, 0] + ours[:, 2] <= H).all()
    assert (ours[:, 1] + ours[:, 3] <= W).all()
