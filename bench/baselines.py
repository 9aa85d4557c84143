#!/usr/bin/python3
"""The baselines that bench/run measures Stoker against, each run in its own process.

  baselines.py dataloader ROOT --pipelines train,val --epochs 2 --batch-size 64
                                --workers 2 --warmup-batches 3 --seed 1
      A torchvision ImageFolder read by a PyTorch DataLoader with the same
      augmentations as Stoker's `train`, `val`, `raw`, `recipe` and `dino`
      pipelines (recipe: torchvision's ResNet-50 recipe of 80.8% top-1, per
      sample as references/classification/presets.py and MixUp/CutMix per
      collated batch; dino: DINO's DataAugmentationDINO, two global and
      eight local crops, in torchvision transforms). For each pipeline:
      a warmup of a few batches (a loader of its own, then shut down), then the
      measured epochs, each one a new iterator (persistent_workers=False, so
      the workers start again every epoch, as they do by default).

  baselines.py decode ROOT --workers 2 [--warmup 16] [--any-format]
      The decode-only limit: every JPEG under ROOT fully decoded to RGB with
      PIL (libjpeg-turbo on Debian; no draft mode, so no DCT scaling) in a pool
      of N processes, from file bytes read into memory beforehand, and nothing
      else. --any-format decodes every JPEG, PNG, WebP and TIFF under ROOT
      (bench/formats).

Prints one JSON object on stdout. Times are wall-clock (time.perf_counter);
`main_cpu_seconds` is time.process_time() of this process over the measured
part, `worker_cpu_seconds` the CPU of its reaped child processes over the same
part (resource.getrusage(RUSAGE_CHILDREN)).
"""
import argparse
import io
import json
import multiprocessing
import os
import resource
import sys
import time

MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


JPEG_EXTS = (".jpg", ".jpeg")
IMAGE_EXTS = JPEG_EXTS + (".png", ".webp", ".tif", ".tiff")


def image_files(root, exts=JPEG_EXTS):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out.extend(os.path.join(dirpath, f) for f in sorted(filenames)
                   if f.lower().endswith(exts) and not f.startswith("."))
    return out


# ---------------------------------------------------------------- dataloader

# The recipes' parameters, which bench/run's Stoker pipelines repeat.
RECIPE_CROP, RECIPE_ERASE, MIXUP_ALPHA, CUTMIX_ALPHA = 176, 0.1, 0.2, 1.0
DINO_GLOBAL, DINO_LOCAL, DINO_LOCAL_CROPS = 224, 96, 8


def dino_transform():
    """DINO's DataAugmentationDINO (facebookresearch/dino, main_dino.py)
    with torchvision's GaussianBlur and RandomSolarize for its PIL ones:
    a list of 2 + DINO_LOCAL_CROPS tensors per sample."""
    from torchvision import transforms as T
    bicubic = T.InterpolationMode.BICUBIC

    def jitter():
        return [T.RandomHorizontalFlip(),
                T.RandomApply([T.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8),
                T.RandomGrayscale(p=0.2)]

    def blur(kernel, p):
        return T.RandomApply([T.GaussianBlur(kernel, (0.1, 2.0))], p=p)

    tail = [T.ToTensor(), T.Normalize(MEAN, STD)]
    global1 = T.Compose([T.RandomResizedCrop(DINO_GLOBAL, (0.4, 1.0),
                                             interpolation=bicubic),
                         *jitter(), blur(23, 1.0), *tail])
    global2 = T.Compose([T.RandomResizedCrop(DINO_GLOBAL, (0.4, 1.0),
                                             interpolation=bicubic),
                         *jitter(), blur(23, 0.1),
                         T.RandomSolarize(128, p=0.2), *tail])
    local = T.Compose([T.RandomResizedCrop(DINO_LOCAL, (0.05, 0.4),
                                           interpolation=bicubic),
                       *jitter(), blur(9, 0.5), *tail])

    def crops(image):
        return ([global1(image), global2(image)] +
                [local(image) for _ in range(DINO_LOCAL_CROPS)])
    return crops


class MixupCutmix:
    """The recipe's per-batch step, as torchvision's classification
    reference runs it in its collate_fn (RandomChoice of RandomMixup
    alpha 0.2 and RandomCutmix alpha 1.0, each with p = 1): collates, then
    mixes the batch with itself rolled by one, and returns soft labels."""

    def __init__(self, num_classes):
        self.num_classes = num_classes

    def __call__(self, samples):
        import random

        import torch
        from torch.utils.data import default_collate
        images, labels = default_collate(samples)
        soft = torch.nn.functional.one_hot(labels, self.num_classes).to(
            images.dtype)
        cutmix = random.random() < 0.5
        alpha = CUTMIX_ALPHA if cutmix else MIXUP_ALPHA
        lam = float(torch.distributions.Beta(alpha, alpha).sample())
        rolled = images.roll(1, 0)
        if cutmix:
            h, w = images.shape[-2:]
            cy, cx = random.randrange(h), random.randrange(w)
            half_h = int(h * (1.0 - lam) ** 0.5) // 2
            half_w = int(w * (1.0 - lam) ** 0.5) // 2
            y0, y1 = max(cy - half_h, 0), min(cy + half_h, h)
            x0, x1 = max(cx - half_w, 0), min(cx + half_w, w)
            images[..., y0:y1, x0:x1] = rolled[..., y0:y1, x0:x1]
            lam = 1.0 - (y1 - y0) * (x1 - x0) / (h * w)
        else:
            images = images.mul_(lam).add_(rolled, alpha=1.0 - lam)
        soft = soft.mul_(lam).add_(soft.roll(1, 0), alpha=1.0 - lam)
        return images, soft


def transforms_for(pipeline):
    import torch
    from torchvision import transforms as T
    if pipeline == "train":
        return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(),
                          T.ToTensor(), T.Normalize(MEAN, STD)])
    if pipeline == "val":
        return T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                          T.Normalize(MEAN, STD)])
    if pipeline == "raw":
        # uint8 CHW, as Stoker's raw pipeline (normalizing is left to the GPU).
        return T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
    if pipeline == "recipe":
        # presets.py's ClassificationPresetTrain with auto_augment ta_wide,
        # random_erase 0.1, crop 176, bilinear.
        bilinear = T.InterpolationMode.BILINEAR
        return T.Compose([T.RandomResizedCrop(RECIPE_CROP,
                                              interpolation=bilinear),
                          T.RandomHorizontalFlip(),
                          T.TrivialAugmentWide(interpolation=bilinear),
                          T.PILToTensor(), T.ConvertImageDtype(torch.float),
                          T.Normalize(MEAN, STD),
                          T.RandomErasing(p=RECIPE_ERASE)])
    if pipeline == "dino":
        return dino_transform()
    raise SystemExit(f"baselines.py: unknown pipeline {pipeline!r}")


def run_dataloader_pipeline(args, pipeline):
    import torch
    import torchvision
    from torch.utils.data import DataLoader

    dataset = torchvision.datasets.ImageFolder(args.root,
                                               transform=transforms_for(pipeline))
    generator = torch.Generator()
    generator.manual_seed(args.seed)

    collate = (MixupCutmix(len(dataset.classes)) if pipeline == "recipe"
               else None)

    def make_loader():
        return DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                          num_workers=args.workers, pin_memory=True,
                          persistent_workers=False, drop_last=False,
                          generator=generator, collate_fn=collate)

    # Warmup: page cache, imports in the workers' parent, allocator. A loader
    # of its own, shut down before the measured part.
    warm_loader = make_loader()
    warm_iter = iter(warm_loader)
    for _ in range(min(args.warmup_batches, len(warm_loader))):
        next(warm_iter)
    del warm_iter  # Joins (and so reaps) its workers.

    loader = make_loader()
    samples = batches = 0
    first_batch_seconds = None
    epoch_first_batch_seconds = []
    cpu0 = time.process_time()
    children0 = children_cpu()
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        epoch_start = time.perf_counter()
        first = True
        for images, labels in loader:
            if isinstance(images, list):  # dino: one tensor per crop.
                crops, images = images, images[0]
            now = time.perf_counter()
            if first:
                epoch_first_batch_seconds.append(now - epoch_start)
                first = False
            if first_batch_seconds is None:
                first_batch_seconds = now - t0
                first_batch_samples = images.shape[0]
            # A trainer would copy the batch to the GPU here; touching the
            # tensors is all this consumer does.
            samples += images.shape[0]
            batches += 1
    seconds = time.perf_counter() - t0
    main_cpu = time.process_time() - cpu0
    worker_cpu = children_cpu() - children0
    steady = None
    if first_batch_seconds is not None and seconds > first_batch_seconds:
        steady = (samples - first_batch_samples) / (seconds - first_batch_seconds)
    return {
        "samples": samples,
        "batches": batches,
        "expected_samples": args.epochs * len(dataset),
        "seconds": seconds,
        "samples_per_second": samples / seconds if seconds > 0 else 0.0,
        "steady_samples_per_second": steady,
        "first_batch_seconds": first_batch_seconds,
        "epoch_first_batch_seconds": epoch_first_batch_seconds,
        "main_cpu_seconds": main_cpu,
        "worker_cpu_seconds": worker_cpu,
        "batch_shape": list(images.shape) if batches else None,
        "crops": len(crops) if pipeline == "dino" and batches else 1,
        "batch_dtype": str(images.dtype) if batches else None,
    }


def cmd_dataloader(args):
    import torch
    import torchvision
    out = {
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "num_workers": args.workers,
        "pin_memory_requested": True,
        # Without CUDA the DataLoader silently skips pinning.
        "pin_memory_effective": bool(torch.cuda.is_available()),
        "pipelines": {},
    }
    for pipeline in args.pipelines.split(","):
        out["pipelines"][pipeline] = run_dataloader_pipeline(args, pipeline)
    out["max_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out["max_child_rss_kib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return out


# -------------------------------------------------------------------- decode

_BLOBS = []  # File bytes, filled before the pool forks so workers share them.


def _die_with_parent():
    """Pool initializer: SIGKILL this worker if its parent dies first."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort, Linux only.
        pass


def _decode_range(bounds):
    from PIL import Image
    start, stop = bounds
    pixels = 0
    for i in range(start, stop):
        im = Image.open(io.BytesIO(_BLOBS[i]))
        im.load()  # Full-size decode: draft() is never called.
        if im.mode != "RGB":
            im = im.convert("RGB")
        pixels += im.size[0] * im.size[1]
    return stop - start, pixels


def cmd_decode(args):
    import PIL
    from PIL import features
    paths = image_files(args.root, IMAGE_EXTS if args.any_format else JPEG_EXTS)
    if not paths:
        raise SystemExit(f"baselines.py: no {'image' if args.any_format else 'JPEG'} "
                         f"files under {args.root}")
    for p in paths:
        with open(p, "rb") as f:
            _BLOBS.append(f.read())
    chunk = max(1, min(16, len(paths) // (4 * args.workers) or 1))
    ranges = [(i, min(i + chunk, len(paths))) for i in range(0, len(paths), chunk)]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(args.workers, initializer=_die_with_parent) as pool:
        # Warmup: start the processes, import PIL in each.
        warm = min(args.warmup, len(paths))
        pool.map(_decode_range, [(i, i + 1) for i in range(warm)], chunksize=1)
        cpu0 = children_cpu()
        t0 = time.perf_counter()
        results = pool.map(_decode_range, ranges, chunksize=1)
        seconds = time.perf_counter() - t0
        pool.close()
        pool.join()
    worker_cpu = children_cpu() - cpu0  # Includes the warmup's share: tiny.
    images = sum(r[0] for r in results)
    pixels = sum(r[1] for r in results)
    return {
        "decoder": f"PIL {PIL.__version__} Image.open().load(), convert('RGB') if not RGB "
                   f"(libjpeg-turbo {features.version('libjpeg_turbo')}), "
                   f"full size, from memory",
        "processes": args.workers,
        "images": images,
        "expected_images": len(paths),
        "bytes": sum(len(b) for b in _BLOBS),
        "megapixels": pixels / 1e6,
        "seconds": seconds,
        "images_per_second": images / seconds if seconds > 0 else 0.0,
        "megapixels_per_second": pixels / 1e6 / seconds if seconds > 0 else 0.0,
        "worker_cpu_seconds": worker_cpu,
    }


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[1:]))
    sub = parser.add_subparsers(dest="cmd", required=True)
    dl = sub.add_parser("dataloader", help="PyTorch DataLoader over an ImageFolder")
    dl.add_argument("root")
    dl.add_argument("--pipelines", default="train,val")
    dl.add_argument("--epochs", type=int, default=2)
    dl.add_argument("--batch-size", type=int, default=64)
    dl.add_argument("--workers", type=int, default=2)
    dl.add_argument("--warmup-batches", type=int, default=3)
    dl.add_argument("--seed", type=int, default=1)
    dec = sub.add_parser("decode", help="full JPEG decode only, N processes")
    dec.add_argument("root")
    dec.add_argument("--workers", type=int, default=2)
    dec.add_argument("--warmup", type=int, default=16)
    dec.add_argument("--any-format", action="store_true",
                     help="every JPEG, PNG, WebP and TIFF, not only the JPEGs")
    args = parser.parse_args()
    out = cmd_dataloader(args) if args.cmd == "dataloader" else cmd_decode(args)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
