#!/usr/bin/python3
"""Writes an ImageNet-like ImageFolder tree of synthetic JPEGs.

Each image has a random size (300-640 px a side), photo-like content (smooth
colour fields, edges, texture and sensor-like noise, so it compresses and
decodes like a photograph: about 100 KB at quality 90) and lives in one of
N class folders. The same seed writes the same files.

usage: make_images.py OUT_DIR [--count 2000] [--classes 10] [--seed 0]
                      [--quality 90] [--min-size 300] [--max-size 640]
"""
import argparse
import os
import sys

import numpy as np
from PIL import Image


def smooth_field(rng, h, w, cells, channels):
    """Bilinearly upsampled random grid: large, smooth shapes."""
    grid = rng.uniform(0, 255, size=(cells + 1, cells + 1, channels))
    ys = np.linspace(0, cells, h)
    xs = np.linspace(0, cells, w)
    y0 = np.minimum(ys.astype(int), cells - 1)
    x0 = np.minimum(xs.astype(int), cells - 1)
    fy = (ys - y0)[:, None, None]
    fx = (xs - x0)[None, :, None]
    g00 = grid[y0][:, x0]
    g01 = grid[y0][:, x0 + 1]
    g10 = grid[y0 + 1][:, x0]
    g11 = grid[y0 + 1][:, x0 + 1]
    return (g00 * (1 - fy) * (1 - fx) + g01 * (1 - fy) * fx +
            g10 * fy * (1 - fx) + g11 * fy * fx)


def make_image(rng, min_size, max_size):
    w = int(rng.integers(min_size, max_size + 1))
    h = int(rng.integers(min_size, max_size + 1))
    img = smooth_field(rng, h, w, int(rng.integers(2, 6)), 3)
    img += 0.5 * (smooth_field(rng, h, w, int(rng.integers(12, 30)), 3) - 128)
    # A few hard-edged discs, like objects.
    yy, xx = np.mgrid[0:h, 0:w]
    for _ in range(int(rng.integers(2, 6))):
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        r = rng.uniform(min(h, w) / 20, min(h, w) / 3)
        mask = (yy - cy) ** 2 + (xx - cx) ** 2 < r * r
        img[mask] = img[mask] * 0.4 + rng.uniform(0, 255, 3) * 0.6
    img += rng.normal(0, 9, size=(h, w, 3))
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quality", type=int, default=90)
    parser.add_argument("--min-size", type=int, default=300)
    parser.add_argument("--max-size", type=int, default=640)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    for c in range(args.classes):
        os.makedirs(os.path.join(args.out_dir, f"class_{c:03d}"), exist_ok=True)
    for i in range(args.count):
        path = os.path.join(args.out_dir, f"class_{i % args.classes:03d}",
                            f"img_{i:06d}.jpg")
        make_image(rng, args.min_size, args.max_size).save(path, quality=args.quality)
        if sys.stderr.isatty() and (i + 1) % 50 == 0:
            print(f"\rimages: {i + 1}/{args.count}", end="", file=sys.stderr)
    if sys.stderr.isatty():
        print(file=sys.stderr)


if __name__ == "__main__":
    main()
