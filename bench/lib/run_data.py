"""bench/run's data: the synthetic ImageFolder and its pack, cached in
--data-dir while their settings match, and the page cache warmed."""
import importlib.util
import json
import os
import shutil
import sys
import time

from .run_common import BENCH_DIR, DATA_FORMAT, log, run_child


def _load_make_images():
    spec = importlib.util.spec_from_file_location(
        "make_images", os.path.join(BENCH_DIR, "make_images.py"))
    mod = importlib.util.module_from_spec(spec)
    # Registered, so that its pool workers can pickle its functions.
    sys.modules["make_images"] = mod
    spec.loader.exec_module(mod)
    return mod


def _read_marker(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def ensure_images(args, transfer=False):
    """The bench's ImageFolder, or (transfer) one of tiny 16 px JPEGs that
    cost the workers little, so that batch delivery is what is measured."""
    count = args.transfer_images if transfer else args.images
    size = (16, 16) if transfer else (args.min_size, args.max_size)
    params = {"format": DATA_FORMAT, "count": count, "classes": args.classes,
              "seed": args.seed, "min_size": size[0], "max_size": size[1],
              "quality": args.quality}
    img_dir = os.path.join(args.data_dir, ("tiny-" if transfer else "images-") + str(count))
    marker = os.path.join(img_dir, ".bench-complete.json")
    if _read_marker(marker) == params:
        log(f"== images: reusing {img_dir}")
        return img_dir, params, 0.0
    log(f"== images: making {count} JPEGs in {img_dir} ({args.jobs} processes)")
    shutil.rmtree(img_dir, ignore_errors=True)
    t0 = time.perf_counter()
    _load_make_images().write_images(
        img_dir, count, args.classes, args.seed, args.quality, size[0], size[1], args.jobs)
    with open(marker, "w") as f:
        json.dump(params, f)
    return img_dir, params, time.perf_counter() - t0


def ensure_packed(args, img_dir, img_params):
    ds_dir = os.path.join(args.data_dir, "packed-" + os.path.basename(img_dir))
    marker = ds_dir + ".bench.json"
    if (_read_marker(marker) == img_params
            and os.path.exists(os.path.join(ds_dir, "manifest.json"))):
        log(f"== pack: reusing {ds_dir}")
        return ds_dir, 0.0
    log(f"== pack: stoker pack {img_dir} -> {ds_dir}")
    if os.path.exists(marker):
        os.remove(marker)
    t0 = time.perf_counter()
    out, err, *_ = run_child([args.stoker, "pack", img_dir, ds_dir, "--force",
                              "--name", "bench"], args.timeout, None, "stoker pack")
    seconds = time.perf_counter() - t0
    with open(marker, "w") as f:
        json.dump(img_params, f)
    return ds_dir, seconds


def warm_page_cache(paths):
    """Reads every file once, so no system pays for the first read from disk."""
    for top in paths:
        for dirpath, _, filenames in os.walk(top):
            for name in filenames:
                with open(os.path.join(dirpath, name), "rb") as f:
                    while f.read(1 << 20):
                        pass
