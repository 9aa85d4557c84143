#!/usr/bin/python3
"""A Python trainer's data loop against stokerd, for bench/run.

  py_consume.py client ADDRESS --pipeline train --batch-size 64 --epochs 2
      stoker.Client(...).stream(...): batches of numpy views (no copy over
      shm), each released as soon as the next one is asked for.
  py_consume.py loader ADDRESS ... [--zero-copy]
      stoker.torch.Loader: dicts of torch tensors, one `for` per epoch, as a
      training loop uses it (default: each tensor copied out of the shm
      slot, as owned as a DataLoader's; --zero-copy: views of the slot).

Touches nothing but the batch's shapes, as the DataLoader baseline does
(a trainer would copy the batch to its GPU here). Prints one JSON object:
samples, seconds (from before connecting to the end of the stream), first
batch seconds, cpu_seconds (time.process_time over the same span), the
transport used, and minor_faults_per_batch: the process's minor page faults
(getrusage ru_minflt) per batch over the second half of its batches, what
a batch costs a long run once the output pool has its blocks and most ring
slots have been read once (a slot's first read faults in its pages, 16 to
a fault); null under two batches; max_rss_kib, the process's peak resident
set (ru_maxrss) by the end of the loop. A Loader also reports its output pool
(stoker._pool) as the stream ends: blocks allocated and reused, and the
free blocks it keeps. Closing the stream and letting go of the last batch
come after the measured span, as in stoker_bench consume, and are reported
apart as teardown_cpu_seconds: over shm the process that lets go of the
ring last pays the kernel for freeing its pages (about 12 ms per 100 MB
here), once per stream, and which process that is depends on timing.
"""
import argparse
import json
import os
import resource
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def faults_per_batch(faults):
    """Minor faults per batch over the second half of the batches, from the
    counter read after each batch (and once before the first)."""
    half = len(faults) // 2
    if len(faults) - 1 - half < 1:
        return None
    return (faults[-1] - faults[half]) / (len(faults) - 1 - half)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("mode", choices=("client", "loader"))
    p.add_argument("address")
    p.add_argument("--dataset", default="bench")
    p.add_argument("--pipeline", required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--transport", default="shm")
    p.add_argument("--prefetch", type=int, default=0)
    p.add_argument("--max-batches", type=int, default=0)
    p.add_argument("--zero-copy", action="store_true")
    p.add_argument("--step-ms", type=int, default=0,
                   help="sleep after each batch, as a trainer's step")
    a = p.parse_args()

    # Imports first: a trainer has torch loaded long before its data loop.
    # grpcio imports its channel module when the first channel is made
    # (about 2.5 ms of CPU): an import too, which a trainer pays once.
    import grpc._channel  # noqa: F401
    import stoker
    if a.mode == "loader":
        import stoker.torch
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    samples = batches = nbytes = 0
    first = None
    next_seconds = []  # Time spent getting each batch.
    step = a.step_ms / 1000.0
    transport = None
    last = None  # The last batch, kept until the figures are taken.
    faults = [minor_faults()]  # Before the first batch, then after each.
    pool = None
    if a.mode == "client":
        client = stoker.Client(a.address)
        stream = client.stream(a.dataset, a.pipeline, a.batch_size, seed=a.seed,
                               epochs=a.epochs, transport=a.transport,
                               prefetch=a.prefetch)
        it = iter(stream)
        while True:
            asked = time.perf_counter()
            batch = next(it, None)
            if batch is None:
                break
            last = batch
            next_seconds.append(time.perf_counter() - asked)
            if first is None:
                first = time.perf_counter() - t0
            samples += len(batch.sample_ids)
            if not nbytes:
                nbytes = batch.nbytes // len(batch.sample_ids)  # Per sample.
            batches += 1
            batch.release()
            faults.append(minor_faults())
            if step:
                time.sleep(step)
            if a.max_batches and batches >= a.max_batches:
                break
        transport = stream.transport
    else:
        loader = stoker.torch.Loader(a.address, a.dataset, a.pipeline,
                                     a.batch_size, seed=a.seed, epochs=a.epochs,
                                     transport=a.transport, prefetch=a.prefetch,
                                     zero_copy=a.zero_copy)
        done = False
        for _ in range(a.epochs):
            it = iter(loader)
            while True:
                asked = time.perf_counter()
                batch = next(it, None)
                if batch is None:
                    break
                last = batch
                next_seconds.append(time.perf_counter() - asked)
                if first is None:
                    first = time.perf_counter() - t0
                samples += len(batch.sample_ids)
                if not nbytes:  # Per sample, once: the rest is as a trainer's.
                    nbytes = sum(t.element_size() * t.nelement()
                                 for t in batch.values()) // samples
                batches += 1
                faults.append(minor_faults())
                if step:
                    time.sleep(step)
                if a.max_batches and batches >= a.max_batches:
                    done = True
                    break
            if done:
                break
        transport = loader.transport
        out = getattr(loader, "output_pool", None)  # None before the pool.
        if out is not None:
            pool = {"keep": out.keep, "allocated": out.allocated,
                    "reused": out.reused, "free_blocks": out.free_blocks,
                    "free_bytes": out.free_bytes}
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    max_rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    del batch, last
    if a.mode == "client":
        stream.close()
        client.close()
    elif loader.stream is not None:
        loader.stream.close()
    teardown = time.process_time() - cpu0 - cpu
    nbytes *= samples  # Every tensor's size is proportional to its batch.
    json.dump({"samples": samples, "batches": batches, "bytes": nbytes, "seconds": seconds,
               "samples_per_second": samples / seconds if seconds > 0 else 0.0,
               "first_batch_seconds": first, "cpu_seconds": cpu,
               "teardown_cpu_seconds": teardown,
               "transport": transport, "status": "OK", "step_ms": a.step_ms,
               "next_seconds_median": (sorted(next_seconds)[len(next_seconds) // 2]
                                       if next_seconds else 0.0),
               "minor_faults_per_batch": faults_per_batch(faults),
               "max_rss_kib": max_rss_kib,
               "output_pool": pool}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
