#!/usr/bin/env python3
"""Consumes a stream with the Python client and reports what `stoker stream
--json` reports, plus this process's CPU time per batch, so the two clients
can be compared on the same daemon and request:

    python3 bench_stream.py --address unix:/tmp/s.sock -d train -p train -b 64
    stoker stream --address unix:/tmp/s.sock -d train -p train -b 64 --json -q

--torch reads through stoker.torch.Loader (CPU tensors) instead of the bare
Stream. --digest adds the XXH3-64 content digest (needs xxhash; it costs CPU,
so leave it off when timing).
"""
import argparse
import json
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--address", "-a", default="unix:/run/stoker/stoker.sock")
    p.add_argument("--dataset", "-d", required=True)
    p.add_argument("--pipeline", "-p", required=True)
    p.add_argument("--batch-size", "-b", type=int, required=True)
    p.add_argument("--epochs", "-e", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prefetch", type=int, default=0)
    p.add_argument("--transport", default="auto")
    p.add_argument("--max-batches", type=int, default=0)
    p.add_argument("--torch", action="store_true")
    p.add_argument("--digest", action="store_true")
    args = p.parse_args()

    import stoker
    if args.torch:
        from stoker.torch import Loader
    started, cpu_started = time.perf_counter(), time.process_time()
    client = stoker.Client(args.address)
    if args.torch:
        loader = Loader(client, args.dataset, args.pipeline, args.batch_size,
                        seed=args.seed, epochs=args.epochs, rank=0,
                        world_size=1, transport=args.transport,
                        prefetch=args.prefetch)
        batches = (b for _ in range(args.epochs) for b in loader)
    else:
        stream = client.stream(args.dataset, args.pipeline, args.batch_size,
                               seed=args.seed, epochs=args.epochs,
                               transport=args.transport,
                               prefetch=args.prefetch)
        batches = iter(stream)
    digest = None
    if args.digest:
        import xxhash
        digest = xxhash.xxh3_64()
    count = samples = nbytes = 0
    first = None
    for batch in batches:
        if first is None:
            first = time.perf_counter() - started
        count += 1
        samples += len(batch.sample_ids)
        for value in batch.values():
            array = value.numpy() if hasattr(value, "numpy") else value
            nbytes += array.nbytes
            if digest is not None:
                digest.update(array)
        if args.max_batches and count == args.max_batches:
            break
    seconds = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    out = {"samples": samples, "batches": count, "bytes": nbytes,
           "seconds": seconds,
           "samples_per_second": samples / seconds if seconds else 0.0,
           "first_batch_seconds": first,
           "cpu_seconds": cpu,
           "cpu_ms_per_batch": 1000 * cpu / count if count else 0.0,
           "client": "python-torch" if args.torch else "python"}
    if digest is not None:
        out["content_digest"] = digest.hexdigest()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
