#!/usr/bin/python3
"""What serving metrics costs: samples/s of stokerd with `metrics: off` and
with the endpoint on and scraped, side by side. A benchmark, not a test: no
pass or fail, it prints the figures.

    tests/metrics/metrics_overhead.py [--build-dir build] [--rounds 5]
        [--images 1000] [--epochs 2] [--scrape-interval 1.0]

It makes --images synthetic ImageNet-like JPEGs (bench/make_images.py) in a
temp dir, packs them, and then runs --rounds rounds, each one stream of
--epochs epochs with metrics off and one with metrics on, in alternating
order (off-on, on-off, ...) so drift on a shared machine falls on both
alike. With metrics on, a scraper thread GETs /metrics every
--scrape-interval seconds while the stream runs, as Prometheus would (the
collector builds the families at scrape time, so an unscraped endpoint costs
nothing at all). Each run gets a fresh stokerd (workers: auto). It prints the
median samples/s of each mode, the change in percent, the median of the
rounds' on/off ratios, the daemon's CPU time per 1000 samples, and the
median time of one scrape.

Every process it starts is stopped by its PID.
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PIPELINE = """\
pipelines:
  train:
    - decode_jpeg: {}
    - random_resized_crop: {size: 224}
    - random_flip: {}
    - normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], dtype: float32}
    - layout: chw
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_once(args, tmp, dataset, metrics_on):
    sock = os.path.join(tmp, "stoker.sock")
    port = free_port()
    config = os.path.join(tmp, "stoker.yaml")
    with open(config, "w") as f:
        f.write(f"listen: {{unix: {sock}}}\nworkers: auto\nmemory_budget: 2GiB\n"
                f"datasets:\n  train: {{path: {dataset}}}\n" + PIPELINE +
                (f"metrics: {{listen: 127.0.0.1:{port}}}\n" if metrics_on
                 else "metrics: off\n"))
    daemon = subprocess.Popen(
        [os.path.join(args.build_dir, "server", "stokerd"), "--config", config],
        stderr=subprocess.DEVNULL)
    stop = threading.Event()
    scrapes = []  # Seconds each GET /metrics took.
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(sock):
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise RuntimeError("stokerd did not start")
            time.sleep(0.02)

        def scrape():
            while not stop.wait(args.scrape_interval):
                try:
                    start = time.perf_counter()
                    with urllib.request.urlopen(
                            f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                        r.read()
                    scrapes.append(time.perf_counter() - start)
                except OSError:
                    pass

        scraper = threading.Thread(target=scrape, daemon=True)
        if metrics_on:
            scraper.start()
        out = subprocess.run(
            [os.path.join(args.build_dir, "client", "cli", "stoker"), "stream",
             "--address", f"unix:{sock}", "--dataset", "train", "--pipeline",
             "train", "--batch-size", "64", "--epochs", str(args.epochs),
             "--job-id", "bench", "--json", "--quiet"],
            capture_output=True, text=True, check=True, timeout=1800)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        stop.set()
        if metrics_on:
            scraper.join()
    finally:
        stop.set()
        daemon.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        rusage = None
        while rusage is None:
            pid, _, usage = os.wait4(daemon.pid, os.WNOHANG)
            if pid == daemon.pid:
                rusage = usage
                daemon.returncode = 0
            elif time.monotonic() > deadline:
                daemon.kill()
            else:
                time.sleep(0.01)
    cpu = rusage.ru_utime + rusage.ru_stime
    return {"rate": result["samples_per_second"],
            "cpu_ms_per_1k": cpu / result["samples"] * 1e6,
            "scrapes": scrapes}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--images", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--scrape-interval", type=float, default=1.0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="stoker-metrics-bench-") as tmp:
        images = os.path.join(tmp, "images")
        dataset = os.path.join(tmp, "train")
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_images.py"),
                        images, "--count", str(args.images), "--classes", "10",
                        "--min-size", "200", "--max-size", "500"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run([os.path.join(args.build_dir, "client", "cli", "stoker"),
                        "pack", images, dataset, "--shards", "4"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        runs = {False: [], True: []}
        scrapes = []
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            for on in order:
                m = run_once(args, tmp, dataset, on)
                runs[on].append(m)
                scrapes += m["scrapes"]
                print(f"round {r + 1} metrics {'on ' if on else 'off'}: "
                      f"{m['rate']:8.1f} samples/s, daemon CPU "
                      f"{m['cpu_ms_per_1k']:6.1f} ms per 1000 samples" +
                      (f", {len(m['scrapes'])} scrapes" if on else ""),
                      flush=True)

        def median(on, key):
            return statistics.median(m[key] for m in runs[on])

        off, on = median(False, "rate"), median(True, "rate")
        cpu_off, cpu_on = median(False, "cpu_ms_per_1k"), median(True, "cpu_ms_per_1k")
        print(json.dumps({
            "images": args.images, "epochs": args.epochs, "rounds": args.rounds,
            "scrape_interval_s": args.scrape_interval,
            "median_samples_per_second_off": round(off, 1),
            "median_samples_per_second_on": round(on, 1),
            "rate_change_percent": round((on - off) / off * 100, 2),
            # Each round's on/off ratio: the two runs of a round are
            # neighbours in time, so this cancels slow drift.
            "median_paired_change_percent": round((statistics.median(
                a["rate"] / b["rate"] for a, b in zip(runs[True], runs[False]))
                - 1) * 100, 2),
            "median_cpu_ms_per_1k_samples_off": round(cpu_off, 2),
            "median_cpu_ms_per_1k_samples_on": round(cpu_on, 2),
            "cpu_change_percent": round((cpu_on - cpu_off) / cpu_off * 100, 2),
            "median_scrape_ms": round(statistics.median(scrapes) * 1e3, 3)
                                if scrapes else None,
            "off": [round(m["rate"], 1) for m in runs[False]],
            "on": [round(m["rate"], 1) for m in runs[True]]}))


if __name__ == "__main__":
    main()
