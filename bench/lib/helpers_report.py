"""bench/helpers' report: ratios taken round by round, the table and the
JSON."""
import json
import os
import subprocess
import time

from .helpers_daemons import CONFIGURATIONS, ROOT
from .helpers_measure import helper_options


def median_row(rows):
    return sorted(rows, key=lambda r: r["samples_per_second"])[len(rows) // 2]


def round_ratios(rows, alone_rows):
    """Each round's samples/s against the node alone's in the same round."""
    return [r["samples_per_second"] / a["samples_per_second"]
            for r, a in zip(rows, alone_rows)]


def median(values):
    """The middle value (the upper of the two middle ones for an even
    count, as median_row)."""
    return sorted(values)[len(values) // 2]


def copy_ms(row):
    """The node's copy (and normalize) time per sample a helper built."""
    seconds = row["helper_costs"].get("node_copy_seconds")
    samples = row["wire"]["samples"]
    return "-" if seconds is None or not samples else \
        f"{1e3 * seconds / samples:.2f}"


def fmt_bytes(x):
    return "-" if x is None else f"{x:,.0f}"


def report(args, cores, pinning, notes, support, rounds, throttled_rounds,
           why_not, wire_rows, digests, commands):
    configs = {}
    for name, (n, goal) in CONFIGURATIONS.items():
        configs[name] = dict(median_row(rounds[name]), helpers=n, goal=goal,
                             pinned=pinning[name], rounds=rounds[name])
    # Ratios are taken round by round, the median of those reported: the
    # machine's speed drifts between rounds (the node alone ran 1121-1439
    # samples/s in one hour), and a round's configurations run back to back.
    alone_rounds = rounds["alone"]
    for name, c in configs.items():
        c["round_ratios_vs_alone"] = round_ratios(rounds[name], alone_rounds)
        c["ratio_vs_alone"] = median(c["round_ratios_vs_alone"])
        over = c["pinned"]["oversubscribed"]
        c["goal_met"] = (None if c["goal"] is None or over
                         else c["ratio_vs_alone"] >= c["goal"])
        # Against 1 + helpers cores' worth; none when the daemons shared.
        c["scaling_vs_linear"] = (None if over else
                                  c["ratio_vs_alone"] / (1 + c["helpers"]))
    if throttled_rounds:
        t = dict(median_row(throttled_rounds), measured=True,
                 link_rate=args.link_rate, rounds=throttled_rounds,
                 pinned={"node": cores[0], "consumer": cores[0],
                         "helpers": pinning["helpers1"]["helpers"],
                         "oversubscribed": pinning["helpers1"]["oversubscribed"]})
        t["round_ratios_vs_alone"] = round_ratios(throttled_rounds,
                                                  alone_rounds)
        t["ratio_vs_alone"] = median(t["round_ratios_vs_alone"])
        t["ratio_vs_helpers1"] = median(
            round_ratios(throttled_rounds, rounds["helpers1"]))
    else:
        t = {"measured": False, "link_rate": args.link_rate,
             "reason": why_not}

    print(f"\nbench/helpers: {args.images} JPEGs ({args.min_size}-"
          f"{args.max_size} px), batch {args.batch_size}, prefetch "
          f"{args.prefetch}, chunk_steps {args.chunk_steps}, "
          f"{args.placement}, {args.epochs} epoch(s) a stream, median of "
          f"{args.repeats} round(s), {len(cores)} core(s) {cores}, load "
          f"{os.getloadavg()[0]:.1f}" + (" (smoke: measures nothing)"
                                         if args.smoke else ""))
    print("| configuration | cores node/helpers | samples/s | vs alone | "
          "goal | remote batches | wire B/sample | node cores | "
          "node copy ms/remote sample | helper cores |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = list(configs.items())
    if t["measured"]:
        rows.append((f"throttled {args.link_rate}", t))
    for name, c in rows:
        pin = c["pinned"]
        hs = ",".join(map(str, pin["helpers"])) or "-"
        if c.get("goal") is None:
            goal = "-"
        elif c["goal_met"] is None:
            goal = f">= {c['goal']}x: n/a, cores shared"
        else:
            goal = f">= {c['goal']}x: {'met' if c['goal_met'] else 'NOT met'}"
        busy = ", ".join(f"{b:.2f}" for b in c["helper_cores_busy"]) or "-"
        ratio = f"{c['ratio_vs_alone']:.2f}x"
        if pin["oversubscribed"]:
            ratio = f"({ratio})"  # Not a scaling figure.
        print(f"| {name} | {pin['node']}/{hs}"
              f"{' (shared)' if pin['oversubscribed'] else ''} "
              f"| {c['samples_per_second']:.0f} | {ratio} "
              f"| {goal} | {c['remote_share']:.0%} "
              f"| {fmt_bytes(c['wire']['bytes_per_sample'])} "
              f"| {c['node_cores_busy']:.2f} | {copy_ms(c)} | {busy} |")
    if not t["measured"]:
        print(f"throttled link ({args.link_rate}): not measured ({why_not})")
    else:
        print(f"throttled link ({args.link_rate}): "
              f"{t['ratio_vs_helpers1']:.2f}x the unthrottled helper; link "
              f"{fmt_bytes(t['link_bytes_per_sample'])} B/sample, "
              f"{t['link_gbit_per_second']:.2f} Gbit/s average")
    print("\nbytes per sample, helper -> node (node + 1 helper, remote_first):")
    print("| variant | wire B/sample | decoded B/sample | link B/sample | "
          "compressed batches | node copy ms/sample | samples/s |")
    print("|---|---|---|---|---|---|---|")
    for vname, w in wire_rows.items():
        compressed = w["helper_costs"].get("compressed_batches")
        print(f"| {vname} | {fmt_bytes(w['wire']['bytes_per_sample'])} "
              f"| {fmt_bytes(w['wire'].get('payload_bytes_per_sample'))} "
              f"| {fmt_bytes(w.get('link_bytes_per_sample'))} "
              f"| {'-' if compressed is None else int(compressed)} "
              f"| {copy_ms(w)} | {w['samples_per_second']:.0f} |")
    if list(wire_rows) == ["default"]:
        notes.append("raw and raw + zstd not measured: this stokerd has no "
                     "helpers.raw / helpers.compress")
    for vname, w in wire_rows.items():
        if w["compress"] in ("zstd", "auto") and \
                w["wire"]["source"].startswith("helpers:"):
            notes.append(f"{vname}: wire B/sample is the helper's "
                         f"stoker_bytes_total, which may count bytes before "
                         f"compression; link B/sample is what crossed")
    same = len({d["content_digest"] for d in digests.values()}) == 1
    print(f"\nsame bytes with a helper as without: {'yes' if same else 'NO'} "
          f"(one epoch each; {digests['helpers1']['remote_batches']} batches "
          f"of it from the helper)")
    source = configs["helpers1"]["wire"]["source"]
    notes.append(f"wire bytes from {source}")
    for n in notes:
        print(f"note: {n}")

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, time.strftime("helpers-%Y%m%d-%H%M%S.json"))
    with open(path, "w") as f:
        json.dump({"smoke": args.smoke,
                   "args": {k: v for k, v in vars(args).items()},
                   "cores_available": len(os.sched_getaffinity(0)),
                   "cpu_count": os.cpu_count(),
                   "cores": cores, "git": git_commit(),
                   "configurations": configs, "throttled": t,
                   # The node's helpers: map beyond its addresses in every
                   # configuration with helpers (the wire section's vary).
                   "helpers_options": helper_options(args),
                   "wire_support": support, "wire_variants": wire_rows,
                   "digests": digests, "same_bytes": same,
                   "commands": commands, "notes": notes,
                   "load": os.getloadavg()}, f, indent=1)
    print(f"wrote {path}")
    return 0 if same else 1


def git_commit():
    out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True, check=False)
    return out.stdout.strip() or None
