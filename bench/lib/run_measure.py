"""bench/run's measurements: stokerd with each consumer and pipeline, the
DataLoader, decode-only, memcpy, transfer and autotune."""
import os
import re
import shutil
import sys
import tempfile
import time

from .run_common import (
    BENCH_DIR, BenchError, Daemon, MEAN, STD, last_json_line, log, ratio,
    run_child)


# The consumers of a Stoker stream the bench measures: name -> (what, transport).
CONSUMERS = {
    "cpp-grpc": ("C++ client", "grpc"),
    "cpp-shm": ("C++ client", "shm"),
    "py-grpc": ("stoker.Client", "grpc"),
    "py-shm": ("stoker.Client", "shm"),
    # The Loader as it comes: each tensor copied out of the slot (owned and
    # writable, as a DataLoader's) into its recycled output memory.
    "loader-shm-copy": ("stoker.torch.Loader", "shm"),
    "loader-shm": ("stoker.torch.Loader, zero_copy", "shm"),
}
DEFAULT_CONSUMERS = ("cpp-grpc", "cpp-shm", "py-grpc", "py-shm", "loader-shm-copy",
                     "loader-shm")
PIPELINES = ("train", "val", "raw", "recipe", "dino")
# The recipes (bench/run --pipelines recipe): torchvision's ResNet-50 recipe of 80.8%
# top-1 and DINO's multi-crop, both as bench/baselines.py runs them in the
# DataLoader. Not in the default list: on 2 cores they take minutes.
RECIPES = ("recipe", "dino")


def stoker_config(sock, ds_dir, workers, prefetch="fixed", default_prefetch=4,
                  tcp=False, metrics=False, classes=10, recipes=False):
    """The daemon's config; the recipes' pipelines only with `recipes` (so
    that a stokerd from before them still runs the others, for a
    before-and-after sitting)."""
    norm = (f"{{mean: {MEAN}, std: {STD}, dtype: float32}}")
    jitter = ("color_jitter: {brightness: 0.4, contrast: 0.4, saturation: 0.2, "
              "hue: 0.1, p: 0.8}")

    def dino_view(size, scale, blur_kernel, blur_p, solarize=0.0):
        ops = [f"{{random_resized_crop: {{size: {size}, scale: {scale}, "
               "interpolation: bicubic}}", "random_flip", f"{{{jitter}}}",
               "{random_grayscale: {p: 0.2}}",
               f"{{gaussian_blur: {{kernel_size: {blur_kernel}, p: {blur_p}}}}}"]
        if solarize:
            ops.append(f"{{solarize: {{threshold: 128, p: {solarize}}}}}")
        ops += [f"{{normalize: {norm}}}", "{layout: chw}"]
        return "[" + ", ".join(ops) + "]"
    listen = f"{{unix: {sock}" + (", tcp: 127.0.0.1:0" if tcp else "") + "}"
    config = f"""# Written by bench/run.
listen: {listen}
workers: {workers}
prefetch: {prefetch}
limits: {{default_prefetch: {default_prefetch}, max_batch_bytes: 4GiB}}
memory_budget: 8GiB
""" + ("metrics: {listen: 127.0.0.1:0}\n" if metrics else "") + f"""datasets:
  bench: {{path: {ds_dir}}}
pipelines:
  train:
    - decode_jpeg
    - random_resized_crop: {{size: 224}}
    - random_flip
    - normalize: {norm}
    - layout: chw
  val:
    - decode_jpeg
    - resize: {{size: 256}}
    - center_crop: {{size: 224}}
    - normalize: {norm}
    - layout: chw
  raw:
    - decode_jpeg
    - resize: {{size: 256}}
    - center_crop: {{size: 224}}
    - layout: chw
"""
    if not recipes:
        return config
    return config + f"""  recipe:
    - decode_jpeg
    - random_resized_crop: {{size: 176}}
    - random_flip
    - trivial_augment_wide: {{interpolation: bilinear}}
    - normalize: {norm}
    - layout: chw
    - random_erasing: {{p: 0.1}}
    - mixup_cutmix: {{mixup_alpha: 0.2, cutmix_alpha: 1.0, num_classes: {classes}}}
  dino:
    decode: [decode_jpeg]
    views:
      global1: {dino_view(224, [0.4, 1], 23, 1.0)}
      global2: {dino_view(224, [0.4, 1], 23, 0.1, solarize=0.2)}
      local: {{count: 8, ops: {dino_view(96, [0.05, 0.4], 9, 0.5)}}}
"""


def _short_tmpdir():
    """A temp dir whose socket path stays well under the 107-byte limit."""
    base = tempfile.gettempdir()
    if len(base) > 60:
        base = "/tmp"
    return tempfile.mkdtemp(prefix="stoker-bench-", dir=base)


def consumer_cmd(args, consumer, address, pipeline, epochs, seed, max_batches=0,
                 batch_size=None, digest=False, prefetch=0, step_ms=0):
    kind, transport = CONSUMERS[consumer]
    batch_size = batch_size or args.batch_size
    if kind == "C++ client":
        cmd = [args.bench_tool, "consume", "--address", address, "--dataset", "bench",
               "--pipeline", pipeline, "--batch-size", str(batch_size),
               "--epochs", str(epochs), "--seed", str(seed), "--transport", transport]
        if digest:
            cmd.append("--digest")
    else:
        cmd = [sys.executable, os.path.join(BENCH_DIR, "py_consume.py"),
               "client" if kind == "stoker.Client" else "loader", address,
               "--pipeline", pipeline, "--batch-size", str(batch_size),
               "--epochs", str(epochs), "--seed", str(seed), "--transport", transport]
        if consumer == "loader-shm":
            cmd.append("--zero-copy")
    if max_batches:
        cmd += ["--max-batches", str(max_batches)]
    if prefetch:
        cmd += ["--prefetch", str(prefetch)]
    if step_ms:
        cmd += ["--step-ms", str(step_ms)]
    return cmd


def log_field(text, event, key):
    """The value of `key` on the last logfmt line of `event` in stokerd's log."""
    for line in reversed(text.splitlines()):
        if f"event={event} " in line or line.endswith(f"event={event}"):
            m = re.search(rf"\b{key}=(\S+)", line)
            if m:
                return m.group(1)
    return None


class StokerRun:
    """One stokerd for a series of streams; stopped by PID on exit."""

    def __init__(self, args, ds_dir, workers, prefetch="fixed", default_prefetch=4,
                 tcp=False, metrics=False):
        self.args = args
        self.tmp = _short_tmpdir()
        self.sock = os.path.join(self.tmp, "stoker.sock")
        self.address = f"unix:{self.sock}"
        config = os.path.join(self.tmp, "stoker.yaml")
        with open(config, "w") as f:
            f.write(stoker_config(self.sock, ds_dir, workers, prefetch, default_prefetch,
                                  tcp, metrics, args.classes,
                                  any(p in RECIPES for p in args.pipelines)))
        self.daemon = Daemon(args.stokerd, config, os.path.join(self.tmp, "stokerd.log"),
                             args.cpus)
        self.tcp_address = None
        self.metrics_port = None
        self.startup = None

    def __enter__(self):
        t0 = time.perf_counter()
        self.daemon.start(self.sock)
        self.startup = time.perf_counter() - t0
        text = self._wait_log("listening")
        port = log_field(text, "listening", "tcp")
        if port and port != '""':
            self.tcp_address = f"127.0.0.1:{port}"
        port = log_field(text, "metrics_listening", "port")
        if port:
            self.metrics_port = int(port)
        return self

    def _wait_log(self, event, timeout=10):
        deadline = time.monotonic() + timeout
        while True:
            text = self.daemon.read_log()
            if f"event={event}" in text or time.monotonic() > deadline:
                return text
            time.sleep(0.02)

    def scrape(self):
        """{metric name (with labels): value} from /metrics, or {}."""
        if not self.metrics_port:
            return {}
        import urllib.request
        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return {}
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                try:
                    out[name] = float(value)
                except ValueError:
                    pass
        return out

    def stream(self, consumer, pipeline, epochs, seed, what, address=None, **kw):
        """Runs one consumer to the end; returns its figures."""
        args, daemon = self.args, self.daemon
        kw.setdefault("prefetch", args.consumer_prefetch)
        cmd = consumer_cmd(args, consumer, address or self.address, pipeline, epochs,
                           seed, **kw)
        threads0 = daemon.thread_cpu()
        dcpu0 = daemon.cpu_seconds()
        out, _, wall, client_cpu, busy = run_child(cmd, args.timeout, args.cpus, what)
        daemon_cpu = daemon.cpu_seconds() - dcpu0
        threads1 = daemon.thread_cpu()
        j = last_json_line(out, what)
        by_name = {}
        for key, cpu in threads1.items():
            delta = cpu - threads0.get(key, 0.0)
            by_name[key[0]] = by_name.get(key[0], 0.0) + delta
        j.update({
            "consumer": consumer,
            "process_wall_seconds": wall,
            # The consumer's own CPU over its loop (connect to last batch);
            # process start and imports are left out, as for the DataLoader.
            "trainer_cpu_seconds": j["cpu_seconds"],
            "trainer_process_cpu_seconds": client_cpu,
            "daemon_cpu_seconds": daemon_cpu,
            "total_cpu_seconds": j["cpu_seconds"] + daemon_cpu,
            "daemon_busy_cores": daemon_cpu / j["seconds"] if j["seconds"] > 0 else None,
            "daemon_cpu_by_thread_name": {k: round(v, 3) for k, v in
                                          sorted(by_name.items(), key=lambda kv: -kv[1])},
            "daemon_vmhwm_kib": daemon.status_kib("VmHWM"),
            "daemon_rss_kib": daemon.status_kib("VmRSS"),
            "other_cpu_share": _other_share(busy, client_cpu + daemon_cpu, wall),
            "load_average": os.getloadavg()[0],
        })
        return j

    def __exit__(self, *exc):
        self.daemon.stop()
        self.log = self.daemon.read_log()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if exc[0] is BenchError:
            log("stokerd's log, last lines:\n" + "\n".join(self.log.splitlines()[-12:]))
        if exc[0] is None and self.daemon.exit_status != 0:
            raise BenchError(f"stokerd did not exit cleanly on SIGTERM "
                             f"(status {self.daemon.exit_status}):\n{self.log}")
        return False


def measure_stoker(args, ds_dir, pipelines):
    """Returns {consumer: {pipeline: figures}}, all from one stokerd."""
    results = {}
    with StokerRun(args, ds_dir, "auto", prefetch="auto", metrics=True) as run:
        for consumer in args.consumers:
            for pipeline in pipelines:
                what = f"{consumer} {pipeline}"
                res = {"daemon_start_seconds": run.startup}
                if args.warmup_batches > 0:
                    warm = run.stream(consumer, pipeline, 1, args.seed + 1000,
                                      what + " (warmup)", max_batches=args.warmup_batches)
                    res["cold_first_batch_seconds"] = warm["first_batch_seconds"]
                res.update(run.stream(consumer, pipeline, args.epochs, args.seed, what))
                res["expected_samples"] = args.epochs * args.n_images
                res["autotune"] = {k: v for k, v in run.scrape().items()
                                   if k.startswith(("stoker_autotune_",
                                                    "stoker_worker_threads"))}
                results.setdefault(consumer, {})[pipeline] = res
        if args.check_digests:
            # Same request, both transports: byte-identical batches.
            digests = {}
            for consumer in ("cpp-grpc", "cpp-shm"):
                j = run.stream(consumer, pipelines[0], 1, args.seed, f"{consumer} digest",
                               digest=True)
                digests[consumer] = j.get("content_digest")
            results["digests"] = digests
    return results


def measure_dataloader(args, img_dir, pipelines):
    cmd = [sys.executable, os.path.join(BENCH_DIR, "baselines.py"), "dataloader", img_dir,
           "--pipelines", ",".join(pipelines), "--epochs", str(args.epochs),
           "--batch-size", str(args.batch_size), "--workers", str(len(args.cpus)),
           "--warmup-batches", str(args.warmup_batches), "--seed", str(args.seed)]
    out, _, wall, cpu, busy = run_child(cmd, args.timeout, args.cpus, "DataLoader baseline")
    j = last_json_line(out, "DataLoader baseline")
    results = {}
    for pipeline, r in j["pipelines"].items():
        r = dict(r)
        r["trainer_cpu_seconds"] = r.pop("main_cpu_seconds")
        r["total_cpu_seconds"] = r["trainer_cpu_seconds"] + r["worker_cpu_seconds"]
        r["num_workers"] = j["num_workers"]
        r["pin_memory_effective"] = j["pin_memory_effective"]
        r["torch"] = j["torch"]
        r["torchvision"] = j["torchvision"]
        r["max_rss_kib"] = j["max_rss_kib"]
        r["max_worker_rss_kib"] = j["max_child_rss_kib"]
        # One process ran every pipeline: its share of other load is per run.
        r["other_cpu_share"] = _other_share(busy, cpu, wall)
        r["load_average"] = os.getloadavg()[0]
        results[pipeline] = r
    return results


def _other_share(busy, ours, wall):
    """Share of the machine's CPU used by processes other than the measured ones."""
    if busy is None or wall <= 0:
        return None
    return max(0.0, (busy - ours) / (wall * os.cpu_count()))


def measure_decode(args, img_dir):
    """The decode-only limit: TurboJPEG (C++, threads) and PIL (processes)."""
    out = {}
    cmd = [args.bench_tool, "decode", img_dir, "--threads", str(len(args.cpus))]
    o, _, wall, cpu, busy = run_child(cmd, args.timeout, args.cpus, "decode-only (TurboJPEG)")
    r = last_json_line(o, "decode-only (TurboJPEG)")
    r["other_cpu_share"] = _other_share(busy, cpu, wall)
    out["turbojpeg"] = r
    cmd = [sys.executable, os.path.join(BENCH_DIR, "baselines.py"), "decode", img_dir,
           "--workers", str(len(args.cpus))]
    o, _, wall, cpu, busy = run_child(cmd, args.timeout, args.cpus, "decode-only (PIL)")
    r = last_json_line(o, "decode-only (PIL)")
    r["other_cpu_share"] = _other_share(busy, cpu, wall)
    out["pil"] = r
    return out


def measure_memcpy(args, nbytes):
    cmd = [args.bench_tool, "memcpy", "--bytes", str(nbytes),
           "--seconds", "0.2" if args.smoke else "1"]
    o, *_ = run_child(cmd, args.timeout, args.cpus, "memcpy")
    return last_json_line(o, "memcpy")


def measure_transfer(args, ds_dir):
    """Big uint8 batches (the `raw` pipeline on tiny images, so the
    workers do little) over shm and over grpc on TCP loopback, against one
    thread's memcpy of the same bytes. Two figures per consumer: end to end
    (as fast as it can take them: bound by the workers on 2 cores), and
    delivery: a trainer that steps --transfer-step-ms per batch, so the
    daemon is ahead, and each batch's bytes over the median time Next() took
    to hand it over. That is what the transport itself costs the trainer."""
    b = args.transfer_batch
    res = {"batch_size": b, "batch_shape": [b, 3, 224, 224],
           "batch_bytes": b * 3 * 224 * 224, "step_ms": args.transfer_step_ms}
    epochs = args.transfer_epochs
    with StokerRun(args, ds_dir, "auto", tcp=True, default_prefetch=4) as run:
        if not run.tcp_address:
            raise BenchError("transfer: stokerd did not log its TCP port")
        for name, consumer, address in (
                ("shm, C++ client", "cpp-shm", None),
                ("shm, stoker.Client", "py-shm", None),
                ("grpc over TCP loopback, C++ client", "cpp-grpc", run.tcp_address),
                ("grpc over TCP loopback, stoker.Client", "py-grpc", run.tcp_address)):
            run.stream(consumer, "raw", 1, args.seed + 7, f"transfer {name} (warmup)",
                       address=address, batch_size=b, max_batches=1)
            j = run.stream(consumer, "raw", epochs, args.seed, f"transfer {name}",
                           address=address, batch_size=b)
            j["gb_per_second"] = j["bytes"] / j["seconds"] / 1e9 if j["seconds"] > 0 else 0
            d = run.stream(consumer, "raw", 1, args.seed, f"transfer {name} (stepping)",
                           address=address, batch_size=b, step_ms=args.transfer_step_ms)
            nxt = d["next_seconds_median"]
            j["delivery_next_seconds_median"] = nxt
            j["delivery_gb_per_second"] = res["batch_bytes"] / nxt / 1e9 if nxt > 0 else None
            j["trainer_cpu_per_batch_ms"] = (d["cpu_seconds"] / d["batches"] * 1e3
                                             if d["batches"] else None)
            j["delivery_run"] = d
            res[name] = j
    res["memcpy"] = measure_memcpy(args, res["batch_bytes"])
    return res


def measure_autotune(args, ds_dir):
    """Hand settings against workers: auto + prefetch: auto, train pipeline,
    C++ client over shm, one daemon per setting."""
    settings = [(w, p) for w in range(1, len(args.cpus) + 1) for p in args.sweep_prefetch]
    out = {"hand": [], "auto": None}
    for w, p in settings + [("auto", "auto")]:
        auto = w == "auto"
        with StokerRun(args, ds_dir, w, prefetch="auto" if auto else "fixed",
                       default_prefetch=4 if auto else p, metrics=auto) as run:
            run.stream("cpp-shm", "train", 1, args.seed + 1000, f"autotune {w}/{p} (warmup)",
                       max_batches=max(1, args.warmup_batches))
            j = run.stream("cpp-shm", "train", args.epochs, args.seed, f"autotune {w}/{p}")
            entry = {"workers": w, "prefetch": p,
                     "samples_per_second": j["samples_per_second"],
                     "samples": j["samples"], "load_average": j["load_average"]}
            if auto:
                m = run.scrape()
                entry["chosen_workers"] = m.get("stoker_autotune_workers")
                entry["chosen_prefetch"] = m.get("stoker_autotune_prefetch")
                entry["autotune_changes"] = m.get("stoker_autotune_changes_total")
                out["auto"] = entry
            else:
                out["hand"].append(entry)
    best = max(out["hand"], key=lambda e: e["samples_per_second"])
    out["best_hand"] = best
    out["auto_vs_best"] = ratio(out["auto"]["samples_per_second"], best["samples_per_second"])
    return out
