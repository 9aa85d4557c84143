#!/usr/bin/python3
"""Writes an ImageNet-like ImageFolder tree of synthetic JPEGs.

Each image has a random size (300-640 px a side), photo-like content (smooth
colour fields, edges, texture and sensor-like noise, so it compresses and
decodes like a photograph: about 100 KB at quality 90) and lives in one of
N class folders. The same seed writes the same files.

usage: make_images.py OUT_DIR [--count 2000] [--classes 10] [--seed 0]
                      [--quality 90] [--min-size 300] [--max-size 640] [--jobs N]
"""
import argparse
import multiprocessing
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


_JOB = {}


def _init_job(params):
    _JOB.update(params)


def _write_one(i):
    # One generator per image, so the output does not depend on the job count.
    rng = np.random.default_rng([_JOB["seed"], i])
    path = os.path.join(_JOB["out_dir"], f"class_{i % _JOB['classes']:03d}",
                        f"img_{i:06d}.jpg")
    tmp = path + ".part"
    make_image(rng, _JOB["min_size"], _JOB["max_size"]).save(
        tmp, format="JPEG", quality=_JOB["quality"])
    os.replace(tmp, path)


def write_images(out_dir, count, classes=10, seed=0, quality=90, min_size=300,
                 max_size=640, jobs=None):
    """Writes `count` images into `out_dir`/class_NNN/ on `jobs` processes
    (default: all cores); the same arguments always write the same files."""
    for c in range(classes):
        os.makedirs(os.path.join(out_dir, f"class_{c:03d}"), exist_ok=True)
    params = dict(out_dir=str(out_dir), classes=classes, seed=seed,
                  quality=quality, min_size=min_size, max_size=max_size)
    tty = sys.stderr.isatty()
    # Spawned, not forked: a child forked while another thread of the caller
    # held a lock can wait on that lock forever (a `bench/run --smoke` in CI
    # hung so, its worker asleep on a futex and deaf to the pool's SIGTERM,
    # which the bench's own handler catches). The callers load this module
    # as `make_images` (its workers import it by that name).
    with multiprocessing.get_context("spawn").Pool(
            jobs or os.cpu_count(), initializer=_init_job,
            initargs=(params,)) as pool:
        for done, _ in enumerate(pool.imap_unordered(_write_one, range(count),
                                                     chunksize=8), 1):
            if tty and done % 50 == 0:
                print(f"\rimages: {done}/{count}", end="", file=sys.stderr)
    if tty:
        print(file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quality", type=int, default=90)
    parser.add_argument("--min-size", type=int, default=300)
    parser.add_argument("--max-size", type=int, default=640)
    parser.add_argument("--jobs", type=int, default=None,
                        help="processes to use (default: all cores)")
    args = parser.parse_args()
    write_images(args.out_dir, args.count, args.classes, args.seed,
                 args.quality, args.min_size, args.max_size, args.jobs)


if __name__ == "__main__":
    main()
