"""bench/run's command line and the build it checks."""
import argparse
import os

from .run_common import ROOT, SetupError
from .run_measure import CONSUMERS, DEFAULT_CONSUMERS, PIPELINES


def parse_args(argv, doc):
    """The command line; `doc` is the script's docstring, its --help."""
    p = argparse.ArgumentParser(
        prog="bench/run", description=doc.split("\n\n")[0].replace("\n", " "),
        epilog="\n\n".join(doc.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true",
                   help="seconds, not minutes: 64 small images (160-320 px), 1 epoch, batch "
                        "16, every consumer, pipeline and section, data in a temp dir; exit 0 "
                        "only if every system ran and gave sane numbers. Flags given "
                        "explicitly still apply")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"),
                   help="CMake build dir holding server/stokerd, client/cli/stoker and "
                        "bench/stoker_bench (default: build/ of the repository)")
    p.add_argument("--images", type=int, help="number of JPEGs (default 2000; smoke 64)")
    p.add_argument("--classes", type=int, default=10, help="class folders (default 10)")
    p.add_argument("--min-size", type=int, help="smallest image side, px (default 300; smoke 160)")
    p.add_argument("--max-size", type=int, help="largest image side, px (default 640; smoke 320)")
    p.add_argument("--quality", type=int, default=90, help="JPEG quality (default 90)")
    p.add_argument("--seed", type=int, default=1,
                   help="seed of the images, the shuffles and the augmentations (default 1)")
    p.add_argument("--data-dir",
                   help="cache of generated images and packed datasets, reused while the "
                        "count and image settings match (default results/bench-data; "
                        "smoke: a temp dir removed at the end)")
    p.add_argument("--out", help="folder for bench-<timestamp>.json and .png "
                                 "(default results/)")
    p.add_argument("--epochs", type=int, help="measured epochs per system and pipeline "
                                              "(default 2; smoke 1)")
    p.add_argument("--batch-size", type=int, help="samples per batch (default 64; smoke 8)")
    p.add_argument("--warmup-batches", type=int,
                   help="batches consumed before the measured epochs, in a stream (stoker) "
                        "or loader (DataLoader) of their own (default 3; smoke 1)")
    p.add_argument("--cores", type=int,
                   help="CPUs every system is pinned to (the first N this process may use): "
                        "stokerd's pool, DataLoader num_workers and decode threads all "
                        "equal N (default: all, here %d)" % len(os.sched_getaffinity(0)))
    p.add_argument("--consumers",
                   help="comma-separated Stoker consumers, each measured on its own: "
                        + ", ".join(f"{k} ({v[0]} over {v[1]})" for k, v in CONSUMERS.items())
                        + " (default: all)")
    p.add_argument("--transports", help="old spelling: grpc,shm means cpp-grpc,cpp-shm")
    p.add_argument("--pipelines", default="train,val,raw",
                   help="comma-separated, from " + ", ".join(PIPELINES) +
                        " (default train,val,raw). recipe is torchvision's ResNet-50 "
                        "recipe (RRC 176, flip, TrivialAugmentWide, normalize, random "
                        "erasing 0.1, MixUp 0.2 / CutMix 1.0 per batch), dino DINO's "
                        "two global and eight local crops (colour jitter, grayscale, "
                        "blur, solarize), each against the DataLoader running the same "
                        "torchvision transforms")
    p.add_argument("--repeats", type=int, default=1,
                   help="rounds of all systems; the table shows the median of each "
                        "figure, the JSON every round (default 1)")
    p.add_argument("--skip-decode-only", action="store_true",
                   help="leave out the decode-only limits")
    p.add_argument("--skip-transfer", action="store_true",
                   help="leave out the transfer section")
    p.add_argument("--skip-autotune", action="store_true",
                   help="leave out the autotune sweep")
    p.add_argument("--transfer-images", type=int,
                   help="tiny JPEGs (16 px) of the transfer dataset (default 2048; smoke 64)")
    p.add_argument("--transfer-batch", type=int,
                   help="batch of the transfer section (default 256, i.e. 256x3x224x224 "
                        "uint8; smoke 8)")
    p.add_argument("--transfer-epochs", type=int, help="default 2; smoke 1")
    p.add_argument("--transfer-step-ms", type=int,
                   help="the stepping trainer's step per batch in the transfer section "
                        "(default 150; smoke 20)")
    p.add_argument("--sweep-prefetch", default=None,
                   help="prefetch depths of the autotune sweep's hand settings, each with "
                        "1..cores workers (default 2,4,8; smoke 2)")
    p.add_argument("--no-chart", action="store_true", help="write no PNG")
    p.add_argument("--jobs", type=int,
                   help="processes generating images (default: --cores)")
    p.add_argument("--timeout", type=int,
                   help="seconds any one step (a pack, a stream, a baseline process) may "
                        "take before it is killed and the run fails (default 1800; smoke 120)")
    args = p.parse_args(argv)

    smoke = args.smoke
    defaults = {"images": 64 if smoke else 2000, "min_size": 160 if smoke else 300,
                "max_size": 320 if smoke else 640, "epochs": 1 if smoke else 2,
                "batch_size": 8 if smoke else 64, "warmup_batches": 0 if smoke else 3,
                "timeout": 120 if smoke else 1800,
                "transfer_images": 64 if smoke else 2048,
                "transfer_batch": 8 if smoke else 256,
                "transfer_epochs": 1 if smoke else 2,
                "transfer_step_ms": 20 if smoke else 150,
                "sweep_prefetch": "2" if smoke else "2,4,8",
                "consumers": ",".join(CONSUMERS if smoke else DEFAULT_CONSUMERS)}
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    allowed = sorted(os.sched_getaffinity(0))
    cores = args.cores or len(allowed)
    if not 1 <= cores <= len(allowed):
        raise SetupError(f"--cores must be 1..{len(allowed)}")
    args.cpus = set(allowed[:cores])
    args.jobs = args.jobs or cores
    args.pipelines = [x for x in args.pipelines.split(",") if x]
    unknown = [x for x in args.pipelines if x not in PIPELINES]
    if unknown or not args.pipelines:
        raise SetupError(f"--pipelines takes {', '.join(PIPELINES)}; got "
                         f"{', '.join(unknown) or 'none'}")
    if args.transports:
        ts = [x for x in args.transports.split(",") if x]
        if not ts or any(x not in ("grpc", "shm") for x in ts):
            raise SetupError("--transports takes grpc, shm or grpc,shm")
        args.consumers = ",".join(f"cpp-{t}" for t in ts)
    args.consumers = [x for x in args.consumers.split(",") if x]
    bad = [x for x in args.consumers if x not in CONSUMERS]
    if not args.consumers or bad:
        raise SetupError(f"--consumers takes {', '.join(CONSUMERS)}; got {bad}")
    if not args.pipelines or any(x not in PIPELINES for x in args.pipelines):
        raise SetupError("--pipelines takes a list from train, val, raw")
    try:
        args.sweep_prefetch = [int(x) for x in args.sweep_prefetch.split(",") if x]
    except ValueError:
        raise SetupError("--sweep-prefetch takes numbers, e.g. 2,4,8")
    if not args.sweep_prefetch or min(args.sweep_prefetch) < 1:
        raise SetupError("--sweep-prefetch takes numbers >= 1")
    for k in ("images", "epochs", "batch_size", "classes", "repeats", "jobs", "timeout",
              "transfer_images", "transfer_batch", "transfer_epochs"):
        if getattr(args, k) < 1:
            raise SetupError(f"--{k.replace('_', '-')} must be at least 1")
    if args.warmup_batches < 0:
        raise SetupError("--warmup-batches must be >= 0")
    if not 16 <= args.min_size <= args.max_size:
        raise SetupError("need 16 <= --min-size <= --max-size")
    if args.images < args.classes:
        raise SetupError("--images must be at least --classes")
    if args.transfer_images < args.transfer_batch:
        raise SetupError("--transfer-images must be at least --transfer-batch")
    # Consumers take the daemon's (tuned) default prefetch.
    args.consumer_prefetch = 0
    # In smoke, the same request over grpc and shm must give the same bytes.
    args.check_digests = smoke and {"cpp-grpc", "cpp-shm"} <= set(args.consumers)
    args.build_dir = os.path.abspath(args.build_dir)
    args.out = os.path.abspath(args.out or os.path.join(ROOT, "results"))
    if args.data_dir:
        args.data_dir = os.path.abspath(args.data_dir)
    return args


def check_build(args):
    args.stokerd = os.path.join(args.build_dir, "server", "stokerd")
    args.stoker = os.path.join(args.build_dir, "client", "cli", "stoker")
    args.bench_tool = os.path.join(args.build_dir, "bench", "stoker_bench")
    missing = [b for b in (args.stokerd, args.stoker, args.bench_tool)
               if not os.access(b, os.X_OK)]
    if missing:
        raise SetupError(
            "not built: " + ", ".join(missing) + "\nbuild them first:\n"
            f"  cmake -S {ROOT} -B {args.build_dir} -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo\n"
            f"  cmake --build {args.build_dir} -j2 --target stokerd stoker stoker_bench")
