"""bench/helpers' measurements: a consumer's stream against the node, and
what each sample cost on the wire and on the helpers."""
import json
import subprocess

from .helpers_daemons import BenchError, _die_with_parent


def _delta(before, after, name, match):
    """Sum over the label sets of family `name` that `match` (labels dict)
    of after - before."""
    return sum(v - before.get(k, 0.0) for k, v in after.items()
               if k[0] == name and match(dict(k[1])))


def wire_bytes_per_sample(node_before, node_after, helpers, job):
    """Bytes per sample that came from helpers to the node during the
    stream of `job`, and where that figure comes from.

    `node_*` are the node's scrapes before and after the stream; `helpers`
    is [(address, before, after)] of each helper's. The node's per-helper
    counters (stoker_helper_wire_bytes_total and
    stoker_helper_samples_total, label `helper`) are used when it exports
    them: they count what was received, compressed or not, for every stream
    of the node, so the deltas hold only while the stream of `job` is the
    node's only one (it is, here). Otherwise each helper's counters for the
    label set the node opened on it (job_id "helper:" + job):
    stoker_bytes_total is the batch payload the helper sent, without gRPC
    and TCP framing and as the helper counts it (whether before or after a
    compression of the future, its help text will say)."""
    wire, samples = ("stoker_helper_wire_bytes_total",
                     "stoker_helper_samples_total")
    payload = "stoker_helper_payload_bytes_total"
    per_helper = {}
    if any(k[0] == wire for k in node_after):
        source = f"node: {wire} / {samples}"
        names = {dict(k[1]).get("helper") for k in node_after if k[0] == wire}
        for h in sorted(n for n in names if n is not None):
            mine = lambda l, h=h: l.get("helper") == h  # noqa: E731
            per_helper[h] = {
                "bytes": _delta(node_before, node_after, wire, mine),
                "samples": _delta(node_before, node_after, samples, mine)}
            if any(k[0] == payload for k in node_after):
                # Decoded: what the node turns into its batches.
                per_helper[h]["payload_bytes"] = _delta(
                    node_before, node_after, payload, mine)
    else:
        source = (f'helpers: stoker_bytes_total / stoker_samples_total '
                  f'{{job_id="helper:{job}"}} (batch payload, no framing)')
        for address, before, after in helpers:
            mine = lambda l: l.get("job_id") == f"helper:{job}"  # noqa: E731
            per_helper[address] = {
                "bytes": _delta(before, after, "stoker_bytes_total", mine),
                "samples": _delta(before, after, "stoker_samples_total", mine)}
    total_bytes = sum(h["bytes"] for h in per_helper.values())
    total_samples = sum(h["samples"] for h in per_helper.values())
    out = {"bytes_per_sample": total_bytes / total_samples
           if total_samples else None,
           "bytes": total_bytes, "samples": total_samples,
           "source": source, "per_helper": per_helper}
    if per_helper and all("payload_bytes" in h for h in per_helper.values()):
        decoded = sum(h["payload_bytes"] for h in per_helper.values())
        out["payload_bytes_per_sample"] = (decoded / total_samples
                                           if total_samples else None)
    return out


def helper_costs(node_before, node_after, helpers, job):
    """What helpers cost the node during the stream of `job`, from the
    node's per-helper counters where it exports them: seconds its chunk
    readers waited and seconds it spent copying (and normalizing) the
    helpers' batches, the chunks placed and the batches that held the
    stream up (late); and the batches the helpers sent compressed (their
    stoker_compressed_batches_total for the node's label set)."""
    out = {}
    for key, name in (("node_wait_seconds", "stoker_helper_wait_seconds_total"),
                      ("node_copy_seconds", "stoker_helper_copy_seconds_total"),
                      ("failures", "stoker_helper_failures_total"),
                      ("chunks", "stoker_helper_chunks_total"),
                      ("late_batches", "stoker_helper_late_batches_total")):
        if any(k[0] == name for k in node_after):
            out[key] = _delta(node_before, node_after, name, lambda l: True)
    name = "stoker_compressed_batches_total"
    if any(k[0] == name for _, _, after in helpers for k in after):
        out["compressed_batches"] = sum(
            _delta(before, after, name,
                   lambda l: l.get("job_id") == f"helper:{job}")
            for _, before, after in helpers)
    return out


def consume(args, node, job, epochs, max_batches=0, digest=False):
    """One `stoker_bench consume` over shm on the node's core; its JSON."""
    cmd = ["taskset", "-c", str(node.core), args.consume, "consume",
           "--address", f"unix:{node.sock}", "--dataset", "bench",
           "--pipeline", "train", "--batch-size", str(args.batch_size),
           "--seed", "3", "--epochs", str(epochs), "--prefetch",
           str(args.prefetch), "--transport", "shm", "--drop-last",
           "--job-id", job]
    if max_batches:
        cmd += ["--max-batches", str(max_batches)]
    if digest:
        cmd.append("--digest")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True,
                             timeout=args.timeout, preexec_fn=_die_with_parent)
    except subprocess.TimeoutExpired:
        raise BenchError(f"{job}: the consumer ran past {args.timeout} s")
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        raise BenchError(f"{job}: stoker_bench consume failed "
                         f"({out.returncode}): {out.stdout}{out.stderr}")
    result = json.loads(lines[-1])
    if result["status"] != "OK" or result["samples"] <= 0:
        raise BenchError(f"{job}: {result}")
    return result


def measure(args, node, helpers, job, epochs):
    """One stream of `job` through `node`: the consumer's rate, the remote
    share, each daemon's CPU and the wire bytes per sample."""
    ns = node.netns
    node.wait_helpers_up()
    events0 = len(node.helper_events())
    node0, help0 = node.scrape(), [h.scrape() for h in helpers]
    lo0 = ns.lo_bytes() if ns else None
    cpu0 = [d.cpu() for d in [node] + helpers]
    r = consume(args, node, job, epochs)
    cpu = [d.cpu() - c for d, c in zip([node] + helpers, cpu0)]
    lo = ns.lo_bytes() - lo0 if ns else None
    close = node.closed_stream(job)
    node1, help1 = node.scrape(), [h.scrape() for h in helpers]
    scrapes = list(zip(node.helpers, help0, help1))
    wire = wire_bytes_per_sample(node0, node1, scrapes, job)
    batches = int(close["batches"])
    remote = int(close["remote_batches"])
    row = {
        "job": job,
        "samples": r["samples"],
        "seconds": r["seconds"],
        "samples_per_second": r["samples_per_second"],
        "steady_samples_per_second": r["steady_samples_per_second"],
        "batches": batches,
        "remote_batches": remote,
        "remote_rebuilt": int(close["remote_rebuilt"]),
        "remote_share": remote / batches if batches else 0.0,
        "node_cores_busy": cpu[0] / r["seconds"],
        "helper_cores_busy": [c / r["seconds"] for c in cpu[1:]],
        "wire": wire,
        "helper_costs": helper_costs(node0, node1, scrapes, job),
        # A helper the node gave up on during the stream, and why.
        "helper_events": node.helper_events()[events0:],
    }
    if ns is not None:
        # Everything on the namespace's lo is between node and helper (the
        # consumer is outside, on the unix socket; a probe every 10 s and
        # the acks are small).
        row["link_bytes"] = lo
        row["link_bytes_per_sample"] = (lo / wire["samples"]
                                        if wire["samples"] else None)
        row["link_gbit_per_second"] = lo * 8 / r["seconds"] / 1e9
    return row


def helper_options(args, raw=None, compress=None, placement=None):
    """The node's `helpers:` map beyond its addresses. `raw` and `compress`
    are written only when asked for: a stokerd from before them refuses
    keys it does not know."""
    o = {"placement": placement or args.placement,
         "chunk_steps": str(args.chunk_steps)}
    if args.helper_streams:
        o["streams"] = str(args.helper_streams)
    if args.stall_seconds:
        o["stall_seconds"] = str(args.stall_seconds)
    raw = args.raw if raw is None else raw
    compress = args.compress if compress is None else compress
    if raw is not None:
        o["raw"] = "true" if raw else "false"
    if compress is not None:
        o["compress"] = compress
    return o


def wire_support(args):
    """Which of helpers.raw / helpers.compress this stokerd knows."""
    out = subprocess.run([args.stokerd, "--help-config"], capture_output=True,
                         text=True, timeout=30)
    return {key: f"`helpers.{key}`" in out.stdout
            for key in ("raw", "compress")}


def wire_variants(support):
    """(name, raw, compress) of the wire section's runs."""
    if support["raw"] and support["compress"]:
        return [("float32", False, "none"), ("raw uint8", True, "none"),
                ("raw uint8 + zstd", True, "zstd")]
    if support["raw"]:
        return [("float32", False, None), ("raw uint8", True, None)]
    if support["compress"]:
        return [("default", None, "none"), ("default + zstd", None, "zstd")]
    return [("default", None, None)]
