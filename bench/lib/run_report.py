"""bench/run's report: the sanity checks, the table, the ratios, the targets,
the chart and the notes."""
import statistics
import subprocess

from .run_common import ROOT, ratio
from .run_measure import CONSUMERS, RECIPES


def check_sane(summary, args):
    problems = []
    stoker, loader, decode = summary["stoker"], summary["dataloader"], summary["decode_only"]
    want = args.epochs * args.n_images
    for c in args.consumers:
        for p in args.pipelines:
            s = stoker.get(c, {}).get(p)
            name = f"stoker {c} {p}"
            if s is None:
                problems.append(f"{name}: no result")
                continue
            if s.get("status") != "OK":
                problems.append(f"{name}: stream status {s.get('status')}")
            if s.get("transport") != CONSUMERS[c][1]:
                problems.append(f"{name}: the stream used transport {s.get('transport')}")
            if s["samples"] != want:
                problems.append(f"{name}: {s['samples']} samples, expected {want}")
            for key in ("samples_per_second", "first_batch_seconds"):
                if not (s.get(key) or 0) > 0:
                    problems.append(f"{name}: {key} = {s.get(key)}")
    digests = stoker.get("digests")
    if digests is not None and (len(set(digests.values())) != 1 or None in digests.values()):
        problems.append(f"grpc and shm delivered different bytes: {digests}")
    for p in args.pipelines:
        d = loader.get(p)
        if d is None:
            problems.append(f"DataLoader {p}: no result")
            continue
        if d["samples"] != want:
            problems.append(f"DataLoader {p}: {d['samples']} samples, expected {want}")
        for key in ("samples_per_second", "first_batch_seconds"):
            if not (d.get(key) or 0) > 0:
                problems.append(f"DataLoader {p}: {key} = {d.get(key)}")
    for name, r in (decode or {}).items():
        if r["images"] != r["expected_images"] or not r["images_per_second"] > 0:
            problems.append(f"decode-only {name}: {r['images']} images at "
                            f"{r['images_per_second']}/s")
    t = summary.get("transfer")
    if t:
        for name, j in t.items():
            if isinstance(j, dict) and "consumer" in j:
                if j.get("status") != "OK" or j["samples"] != args.transfer_images * \
                        args.transfer_epochs:
                    problems.append(f"transfer {name}: status {j.get('status')}, "
                                    f"{j['samples']} samples")
        if not t["memcpy"]["gb_per_second"] > 0:
            problems.append("memcpy: no bandwidth")
    a = summary.get("autotune")
    if a:
        for e in a["hand"] + [a["auto"]]:
            if e["samples"] != want or not e["samples_per_second"] > 0:
                problems.append(f"autotune {e['workers']}/{e['prefetch']}: {e['samples']} "
                                f"samples at {e['samples_per_second']}/s")
        if a["auto"].get("chosen_workers") is None:
            problems.append("autotune: stokerd's metrics show no stoker_autotune_workers")
    return problems


def median_merge(rounds):
    """Per-key median over rounds of nested dicts; non-numbers from round 0."""
    first = rounds[0]
    if isinstance(first, dict):
        return {k: median_merge([r[k] for r in rounds if isinstance(r, dict) and k in r])
                for k in first}
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        nums = [r for r in rounds if isinstance(r, (int, float)) and not isinstance(r, bool)]
        if all(isinstance(n, int) for n in nums):
            return statistics.median_low(nums)  # Counts stay whole numbers.
        return statistics.median(nums)
    return first


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def per_1k(cpu, samples):
    return cpu / samples * 1000 if cpu is not None and samples else None


def consumer_label(c):
    kind, transport = CONSUMERS[c]
    return f"stoker, {kind}, {transport}"


def build_table(summary, args):
    rows = []
    for p in args.pipelines:
        for c in args.consumers:
            s = summary["stoker"][c][p]
            rows.append((consumer_label(c), p, s["samples_per_second"],
                         s["first_batch_seconds"],
                         per_1k(s["trainer_cpu_seconds"], s["samples"]),
                         per_1k(s["total_cpu_seconds"], s["samples"]),
                         s.get("minor_faults_per_batch"),
                         s["daemon_busy_cores"], s["daemon_vmhwm_kib"] / 1024,
                         s["load_average"]))
        d = summary["dataloader"][p]
        rows.append((f"DataLoader, {d['num_workers']} workers", p, d["samples_per_second"],
                     d["first_batch_seconds"], per_1k(d["trainer_cpu_seconds"], d["samples"]),
                     per_1k(d["total_cpu_seconds"], d["samples"]), None, None, None,
                     d["load_average"]))
    for name, dec in (summary.get("decode_only") or {}).items():
        n = dec.get("threads") or dec.get("processes")
        cpu = dec.get("cpu_seconds", dec.get("worker_cpu_seconds"))
        rows.append((f"decode-only, {'TurboJPEG' if name == 'turbojpeg' else 'PIL'} x{n}",
                     "(full)", dec["images_per_second"], None, None,
                     per_1k(cpu, dec["images"]), None, None, None, None))
    head = ("system", "pipeline", "samples/s", "1st batch s", "trainer CPU s/1k",
            "total CPU s/1k", "faults/batch", "daemon cores", "daemon RSS MiB", "load")
    lines = [f"{head[0]:<44}{head[1]:<9}{head[2]:>10}{head[3]:>12}{head[4]:>17}"
             f"{head[5]:>15}{head[6]:>13}{head[7]:>13}{head[8]:>15}{head[9]:>6}"]
    for r in rows:
        lines.append(f"{r[0]:<44}{r[1]:<9}{fmt(r[2], '.1f'):>10}{fmt(r[3], '.3f'):>12}"
                     f"{fmt(r[4], '.3f'):>17}{fmt(r[5], '.2f'):>15}{fmt(r[6], '.0f'):>13}"
                     f"{fmt(r[7], '.2f'):>13}{fmt(r[8], '.0f'):>15}{fmt(r[9], '.2f'):>6}")
    return "\n".join(lines)


def build_ratios(summary, args):
    out = {}
    dec = (summary.get("decode_only") or {}).get("turbojpeg")
    for p in args.pipelines:
        d = summary["dataloader"][p]
        for c in args.consumers:
            s = summary["stoker"][c][p]
            name = f"{c}/DataLoader {p}"
            out[f"{name}: samples/s"] = ratio(s["samples_per_second"], d["samples_per_second"])
            out[f"{name}: trainer CPU per sample (<1 better)"] = ratio(
                per_1k(s["trainer_cpu_seconds"], s["samples"]),
                per_1k(d["trainer_cpu_seconds"], d["samples"]))
            if dec and p == "train":
                out[f"{c} {p}/decode-only (TurboJPEG): samples/s"] = ratio(
                    s["samples_per_second"], dec["images_per_second"])
        if "py-shm" in args.consumers and "cpp-shm" in args.consumers:
            out[f"py-shm/cpp-shm {p}: samples/s"] = ratio(
                summary["stoker"]["py-shm"][p]["samples_per_second"],
                summary["stoker"]["cpp-shm"][p]["samples_per_second"])
    return out


def _target(value, target, at_least=True, unit="x"):
    met = value is not None and (value >= target if at_least else value <= target)
    return {"value": value, "target": target, "unit": unit, "met": met,
            "direction": ">=" if at_least else "<="}


def build_targets(summary, args):
    out = {}
    st, dl = summary["stoker"], summary["dataloader"]
    dec = (summary.get("decode_only") or {}).get("turbojpeg")

    def sps(c, p):
        return st.get(c, {}).get(p, {}).get("samples_per_second")

    def cpu_ratio(c, p):
        s = st.get(c, {}).get(p)
        if not s or p not in dl:
            return None
        return ratio(per_1k(s["trainer_cpu_seconds"], s["samples"]),
                     per_1k(dl[p]["trainer_cpu_seconds"], dl[p]["samples"]))

    if "train" in args.pipelines:
        for c in ("cpp-shm", "loader-shm-copy", "loader-shm"):
            if c not in args.consumers:
                continue
            out[f"{c} train >= 3.0x DataLoader"] = _target(
                ratio(sps(c, "train"), dl["train"]["samples_per_second"]), 3.0)
            if dec:
                out[f"{c} train >= 1.0x decode-only (TurboJPEG)"] = _target(
                    ratio(sps(c, "train"), dec["images_per_second"]), 1.0)
            out[f"{c} train trainer CPU/1k <= 0.1x DataLoader main"] = _target(
                cpu_ratio(c, "train"), 0.1, at_least=False)
            out[f"{c} train trainer CPU/batch <= 0.05x DataLoader main"] = _target(
                cpu_ratio(c, "train"), 0.05, at_least=False)
        if "loader-shm" in args.consumers:
            out["loader-shm train >= 2x DataLoader"] = _target(
                ratio(sps("loader-shm", "train"), dl["train"]["samples_per_second"]), 2.0)
        if "loader-shm-copy" in args.consumers:
            if "loader-shm" in args.consumers:
                out["loader-shm-copy train >= 0.9x loader-shm"] = _target(
                    ratio(sps("loader-shm-copy", "train"), sps("loader-shm", "train")), 0.9)
            out["loader-shm-copy train trainer faults/batch <= 1000"] = _target(
                st["loader-shm-copy"]["train"].get("minor_faults_per_batch"), 1000,
                at_least=False, unit="")
        if "py-shm" in args.consumers and "cpp-shm" in args.consumers:
            out["py-shm train >= 0.9x cpp-shm"] = _target(
                ratio(sps("py-shm", "train"), sps("cpp-shm", "train")), 0.9)
    if "val" in args.pipelines and "cpp-shm" in args.consumers:
        out["cpp-shm val >= 2x DataLoader"] = _target(
            ratio(sps("cpp-shm", "val"), dl["val"]["samples_per_second"]), 2.0)
    for p in RECIPES:
        for c in ("cpp-shm", "loader-shm"):
            if p in args.pipelines and c in args.consumers:
                out[f"{c} {p} >= 3.0x DataLoader"] = _target(
                    ratio(sps(c, p), dl[p]["samples_per_second"]), 3.0)
    t = summary.get("transfer")
    if t:
        mem = t["memcpy"]["gb_per_second"]
        for name in ("shm, C++ client", "shm, stoker.Client"):
            out[f"delivery {name} >= 0.8x memcpy"] = _target(
                ratio(t[name]["delivery_gb_per_second"], mem), 0.8)
        for name in ("grpc over TCP loopback, C++ client",
                     "grpc over TCP loopback, stoker.Client"):
            out[f"delivery {name} >= 2 GB/s"] = _target(
                t[name]["delivery_gb_per_second"], 2.0, unit=" GB/s")
    a = summary.get("autotune")
    if a:
        out["autotune (auto/auto) >= 0.9x best hand setting"] = _target(
            a["auto_vs_best"], 0.9)
    return out


def write_chart(path, summary, args):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001 - any import problem means no chart.
        return (f"no chart: matplotlib cannot be imported ({e.__class__.__name__}: {e}); "
                "install python3-matplotlib")
    pipes = args.pipelines
    series = [(consumer_label(c), [summary["stoker"][c][p]["samples_per_second"]
                                   for p in pipes]) for c in args.consumers]
    series.append(("PyTorch DataLoader", [summary["dataloader"][p]["samples_per_second"]
                                          for p in pipes]))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series):
        ax.bar([x + (i - (len(series) - 1) / 2) * width for x in range(len(pipes))],
               values, width, label=label)
    styles = {"turbojpeg": ("black", "--"), "pil": ("grey", ":")}
    for name, dec in (summary.get("decode_only") or {}).items():
        color, ls = styles[name]
        ax.axhline(dec["images_per_second"], color=color, linestyle=ls,
                   label=f"decode-only, {'TurboJPEG' if name == 'turbojpeg' else 'PIL'} "
                         "(full size)")
    ax.set_xticks(list(range(len(pipes))))
    ax.set_xticklabels(pipes)
    ax.set_ylabel("samples/s")
    ax.set_title(f"Stoker benchmark: same images, same {len(args.cpus)} cores")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"chart: {path}"


def git_commit():
    try:
        out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain"],
                               capture_output=True, text=True, timeout=10)
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except Exception:  # noqa: BLE001
        return None


def print_report(args, summary, table, ratios, targets, notes):
    print()
    print(f"Stoker benchmark: {args.n_images} JPEGs ({args.min_size}-{args.max_size} px, "
          f"q{args.quality}), batch {args.batch_size}, {args.epochs} epoch(s) measured after "
          f"{args.warmup_batches} warmup batch(es), {len(args.cpus)} cores "
          f"(CPUs {sorted(args.cpus)}), {args.repeats} round(s)"
          + (", median of each figure" if args.repeats > 1 else ""))
    print(table)
    t = summary.get("transfer")
    if t:
        print()
        print(f"transfer: raw pipeline, batches {t['batch_shape']} uint8 "
              f"({t['batch_bytes'] / 1e6:.1f} MB), {args.transfer_images} tiny JPEGs")
        print(f"  {'consumer':<40}{'end-to-end GB/s':>16}{'daemon cores':>14}"
              f"{'delivery GB/s':>15}{'Next() ms':>11}{'trainer CPU ms/batch':>22}")
        for name, j in t.items():
            if isinstance(j, dict) and "consumer" in j:
                print(f"  {name:<40}{j['gb_per_second']:>16.2f}"
                      f"{fmt(j['daemon_busy_cores'], '.2f'):>14}"
                      f"{fmt(j['delivery_gb_per_second'], '.2f'):>15}"
                      f"{j['delivery_next_seconds_median'] * 1e3:>11.3f}"
                      f"{fmt(j['trainer_cpu_per_batch_ms'], '.3f'):>22}")
        print(f"  {'memcpy, one thread, same bytes':<40}{t['memcpy']['gb_per_second']:>16.2f}")
        print(f"  (delivery: a trainer stepping {t['step_ms']} ms per batch; bytes per batch "
              "over the median time Next() took)")
    a = summary.get("autotune")
    if a:
        print()
        print("autotune sweep: train, C++ client over shm, one stokerd per setting")
        for e in a["hand"]:
            best = " (best)" if e is a["best_hand"] or e == a["best_hand"] else ""
            print(f"  workers {e['workers']}, prefetch {e['prefetch']:<3}"
                  f"{e['samples_per_second']:>10.1f} samples/s{best}")
        e = a["auto"]
        print(f"  workers auto, prefetch auto {e['samples_per_second']:>8.1f} samples/s; the "
              f"tuner chose {fmt(e.get('chosen_workers'), '.0f')} workers, prefetch "
              f"{fmt(e.get('chosen_prefetch'), '.0f')}; {fmt(a['auto_vs_best'], '.2f')}x the "
              "best hand setting")
    print()
    print("ratios:")
    width = max(len(k) for k in ratios) + 2
    for k, v in ratios.items():
        print(f"  {k:<{width}}{fmt(v, '.3f'):>7}x")
    print("targets:")
    width = max(len(k) for k in targets) + 2
    for k, t in targets.items():
        shown = fmt(t["value"], ".3f") + t["unit"]
        print(f"  {k:<{width}}{shown:>11}   {'met' if t['met'] else 'NOT met'}")
    print("notes:")
    for n in notes:
        print(f"  - {n}")


def build_notes(args, summary, loadavg_start, loadavg_end):
    notes = []
    notes.append("stoker first batch: from the consumer's start (connect + open stream + "
                 "first batch) with stokerd running; DataLoader: iter(loader) to the first "
                 "batch, worker start included. samples/s of every system include the first "
                 "batch")
    notes.append("trainer CPU: the consuming process over its loop (connect to last "
                 "batch; process start and imports left out): stoker_bench consume (C++, "
                 "no hashing), py_consume.py (stoker.Client; stoker.torch.Loader as it "
                 "comes, copying out of the shm slot, as loader-shm-copy, and with "
                 "zero_copy=True as loader-shm), the DataLoader's main process. "
                 "total CPU adds stokerd or the DataLoader workers")
    notes.append("faults/batch: the Python consumer's minor page faults per batch over "
                 "the second half of its batches (py_consume.py; a fault costs about "
                 "12 us in a VM); not counted for the C++ client and the DataLoader")
    notes.append("stokerd runs with workers: auto and prefetch: auto (the autotuner)")
    p0 = args.pipelines[0]
    if not summary["dataloader"][p0]["pin_memory_effective"]:
        notes.append("pin_memory=True had no effect: torch sees no CUDA device")
    if summary.get("decode_only"):
        notes.append("decode-only: every JPEG fully decoded, nothing else: "
                     + "; ".join(d["decoder"] for d in summary["decode_only"].values())
                     + ". stoker decodes only the crop window at a reduced DCT scale, so it "
                     "can beat this")
    for c in args.consumers:
        for p in args.pipelines:
            s = summary["stoker"][c][p]
            top = ", ".join(f"{k} {v:.1f}s" for k, v in
                            list(s["daemon_cpu_by_thread_name"].items())[:3])
            notes.append(f"stokerd {c} {p}: {fmt(s['daemon_busy_cores'], '.2f')} busy cores; "
                         f"CPU by thread name: {top}")
    others = [(f"stoker {c} {p}", res.get("other_cpu_share"))
              for c in args.consumers for p, res in summary["stoker"][c].items()]
    others += [(f"DataLoader {p}", res.get("other_cpu_share"))
               for p, res in summary["dataloader"].items()]
    worst = max((o for o in others if o[1] is not None), key=lambda o: o[1], default=None)
    if worst and worst[1] > 0.05:
        notes.append(f"other processes used up to {worst[1]:.0%} of the machine's CPU during "
                     f"a measurement ({worst[0]}): absolute figures are noisy, ratios less so")
    notes.append(f"load average {loadavg_start[0]:.2f} at start, {loadavg_end[0]:.2f} at end; "
                 "the table's `load` column is the 1-minute load average after each row")
    return notes
