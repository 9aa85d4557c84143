"""The JPEG folder and its packed dataset that bench/jobs, bench/helpers and
bench/memory run on: made once, cached under the data dir by their
parameters."""
import importlib.util
import os
import shutil
import subprocess
import sys

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def make_dataset(data_dir, images, min_size, max_size, stoker, name):
    """(image folder, packed dataset) of `images` JPEGs in 10 classes whose
    sides are drawn from [min_size, max_size], packed by `stoker` under the
    dataset name `name`; made only if the packed one is missing."""
    key = f"{images}-{min_size}-{max_size}"
    img_dir = os.path.join(data_dir, f"images-{key}")
    ds_dir = os.path.join(data_dir, f"packed-{key}")
    if not os.path.exists(os.path.join(ds_dir, "manifest.json")):
        shutil.rmtree(img_dir, ignore_errors=True)
        log(f"== making {images} JPEGs in {img_dir}")
        spec = importlib.util.spec_from_file_location(
            "make_images", os.path.join(BENCH_DIR, "make_images.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules["make_images"] = mod  # Its pool workers pickle by name.
        spec.loader.exec_module(mod)
        mod.write_images(img_dir, images, 10, 1, 90, min_size, max_size,
                         os.cpu_count() or 1)
        log(f"== stoker pack -> {ds_dir}")
        subprocess.run([stoker, "pack", img_dir, ds_dir, "--force",
                        "--name", name], check=True,
                       stdout=subprocess.DEVNULL)
    return img_dir, ds_dir
