#!/usr/bin/env python3
"""Priorities on generated mixes, on the simulated GPU (`gpumux run --sim H100`).

A high-priority (HP) inference-like server beside one or two best-effort (BE) training-like
tenants, each mix drawn from a seed: the HP launch pattern (each kernel synchronised; the whole
step launched then one synchronise; one graph launch; two streams), its kernel count and length,
its period, jitter and sometimes a change of request rate halfway; the BE kernels' lengths (fixed
or spread), how often BE synchronises, and the GPU mode (time-sliced or MPS-like). Even-numbered
mixes are the "choose" half (what the design is tuned on), odd ones the "check" half (reported).

Each mix runs the HP tenant alone, then beside BE with priorities (`--priority high` / `low`), and
with --control also with none (all normal). For each it prints the HP step latency p99 (from the
step's planned start to its synchronise's return, after the first second) against solo, the
on-device p99 (events around the step) against solo, the first second's and the second after a
change's p99, and what BE kept of the GPU time HP leaves, beside the most whole BE kernels could
fill between the steps in their order (a Monte Carlo bracket: none cut, none run into a step).
Mixes are classed by that bracket: "fits" (whole kernels can fill >= 80% of the time between
steps), "partly", "none" (no BE kernel fits a gap). The summary gives, per half and class, the
median and worst of each figure. One run; ratios are within one run (the machine is shared).

    bench/priority_mixes.py [--build build/release] [--mixes 24] [--seconds 4] [--seed 1]
                            [--rounds 1] [--control] [--half both|choose|check] [--only 23,39]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

PATTERNS = ["each", "step", "graph", "streams2"]


def draw_mix(rng, index):
    """One mix: what each tenant runs."""
    mode = ["timeslice", "mps"][(index // 2) % 2]  # both modes in both halves
    pattern = rng.choice(PATTERNS)
    kernels = rng.randint(5, 40)
    kernel_us = rng.choice([100, 150, 200, 250, 300, 400, 500])
    work_ms = kernels * kernel_us / 1000
    period = max(int(work_ms) + 2, round(work_ms / rng.uniform(0.15, 0.4)))
    jitter = rng.choice([0, 0, round(period * 0.1, 1)])
    periods = str(period)
    if rng.random() < 0.25:  # a new request rate halfway
        new = max(int(work_ms) + 2, round(period * rng.choice([0.5, 2])))
        periods = f"{period}/{new}"
    bes = []
    for _ in range(rng.choice([1, 1, 2])):
        longest = rng.choice([1, 2, 3, 4, 6, 8, 12, 20])
        shortest = longest if rng.random() < 0.5 else rng.randint(1, longest)
        bes.append({"min_ms": shortest, "max_ms": longest, "sync_every": rng.choice([0, 1, 4])})
    return {"index": index, "half": "choose" if index % 2 == 0 else "check", "mode": mode,
            "pattern": pattern, "kernels": kernels, "kernel_us": kernel_us, "periods": periods,
            "period_ms": period, "jitter_ms": jitter, "be": bes}


def describe(m):
    be = " + ".join(
        f"{b['min_ms']}" + (f"-{b['max_ms']}" if b["max_ms"] != b["min_ms"] else "") +
        "ms " + ("2 queued" if b["sync_every"] == 0 else f"sync/{b['sync_every']}")
        for b in m["be"])
    jitter = f"±{m['jitter_ms']}" if m["jitter_ms"] else ""
    return (f"{m['half']} {m['index']}: {m['pattern']} {m['kernels']}×{m['kernel_us']}µs/"
            f"{m['periods']}{jitter}ms, BE {be}")


def run(build, mode, seconds, tenants):
    """Starts `tenants` [(name, priority, args)] together on a fresh simulated GPU; returns each
    one's JSON line ({} where it printed none)."""
    gpumux = os.path.join(build, "gpumux")
    client = os.path.join(build, "bench", "gpumux_latency_tenant")
    with tempfile.TemporaryDirectory() as work:
        env = dict(os.environ, GPUMUX_RUNTIME_DIR=work, GPUMUX_SIM_MODE=mode,
                   GPUMUX_SIM_STATE=os.path.join(work, "sim.state"))
        start = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + 1_500_000_000
        procs = []
        for name, priority, args in tenants:
            cmd = [gpumux, "run", "--sim", "H100", "--tenant", name, "--mem", "1GiB",
                   "--priority", priority, "--", client] + [
                       str(start) if a == "START" else str(a) for a in args]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, text=True))
        results = []
        for p in procs:
            out, _ = p.communicate()
            try:
                results.append(json.loads(out.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                results.append({})
        return results


def pct(values, p):
    """The nearest rank at or above p, as the tenant's own p50/p99; nan for none."""
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(p * len(v)))]


def bracket(m, gap_ms, draws=4000):
    """The most of a gap of `gap_ms` whole BE kernels of the mix fill in their order, on average:
    kernels go while the next still fits."""
    if gap_ms <= 0:
        return 0.0
    rng, filled, pending = random.Random(1), 0.0, None

    def draw():
        b = rng.choice(m["be"])
        return rng.randint(b["min_ms"], b["max_ms"])

    for _ in range(draws):
        t = 0.0
        pending = pending if pending and pending <= gap_ms else draw()  # longer: into a step
        while t + pending <= gap_ms:
            t += pending
            pending = draw()
        filled += t / gap_ms / draws
    return filled


def measure(build, m, seconds, rounds, control):
    hp_args = ["hp", "START", seconds, m["periods"], m["kernels"], m["kernel_us"], m["pattern"],
               m["jitter_ms"], m["index"] + 1]
    be_args = [["be", "START", seconds, b["min_ms"], b["max_ms"], m["index"] + 7 + i,
                b["sync_every"]] for i, b in enumerate(m["be"])]
    pooled = {"solo": [], "paired": []}
    for _ in range(rounds):
        pooled["solo"].append(run(build, m["mode"], seconds, [("hp", "high", hp_args)]))
        pooled["paired"].append(run(build, m["mode"], seconds, [("hp", "high", hp_args)] + [
            (f"be{i}", "low", a) for i, a in enumerate(be_args)]))
    unguarded = None
    if control:
        unguarded = run(build, m["mode"], seconds, [("hp", "normal", hp_args)] + [
            (f"be{i}", "normal", a) for i, a in enumerate(be_args)])

    def steps(kind, key):
        return [x for r in pooled[kind] for x in r[0].get(key, [])]

    def be_share(results):
        return sum(r.get("gpu_share", 0) for r in results[1:])

    solo99, paired99 = pct(steps("solo", "latency_ms"), .99), pct(steps("paired", "latency_ms"), .99)
    solo_dev = pct(steps("solo", "device_ms"), .99)
    paired_dev = pct(steps("paired", "device_ms"), .99)
    hp_share = statistics.mean(r[0].get("gpu_share", 0) for r in pooled["solo"])
    left = 1 - hp_share
    be_kept = statistics.mean(be_share(r) for r in pooled["paired"]) / left
    solo50 = pct(steps("solo", "latency_ms"), .5)
    # What others keep clear before a step: a kernel sent as a late step ends must end before the
    # next, which may come early: twice the jitter, and the forecast's least margin.
    margin = 0.2 + 2 * m["jitter_ms"]
    # Each rate holds half the run; the bracket as a share of what HP leaves, be_kept's base.
    periods = [float(p) for p in m["periods"].split("/")]
    fill = most = 0.0
    for period in periods:
        room = max(0.0, period - solo50 - margin)
        share = bracket(m, room)
        fill += share / len(periods)
        most += share * room / period / len(periods)
    most = most / left if left > 0 else 0
    cls = "fits" if fill >= 0.8 else ("none" if fill == 0 else "partly")
    row = {
        "mix": describe(m), "half": m["half"], "class": cls, "mode": m["mode"],
        "solo_p50": solo50, "solo_p99": solo99, "p99": paired99, "p99_x": paired99 / solo99,
        "device_x": paired_dev / solo_dev, "be_kept": be_kept, "most": most,
        "first_p99": pct(steps("paired", "first_ms"), .99),
        "solo_first_p99": pct(steps("solo", "first_ms"), .99),
        "after_change_p99": pct(steps("paired", "after_change_ms"), .99),
        "solo_after_change_p99": pct(steps("solo", "after_change_ms"), .99),
    }
    if unguarded:
        row["control_x"] = pct(unguarded[0].get("latency_ms", []), .99) / solo99
        row["control_be"] = be_share(unguarded) / left
    return row


def summary(rows, half):
    out = []
    for cls in ["fits", "partly", "none"]:
        sel = [r for r in rows if r["half"] == half and r["class"] == cls]
        if not sel:
            continue
        x = [r["p99_x"] for r in sel]
        d = [r["device_x"] for r in sel]
        kept = [r["be_kept"] for r in sel]
        rel = [r["be_kept"] / r["most"] for r in sel if r["most"] > 0]
        out.append(
            f"| {half} | {cls} | {len(sel)} | {statistics.median(x):.2f}× / {max(x):.2f}× "
            f"| {statistics.median(d):.2f}× / {max(d):.2f}× "
            f"| {statistics.median(kept):.0%} / {min(kept):.0%} "
            f"| {(f'{statistics.median(rel):.0%} / {min(rel):.0%}' if rel else '-')} |")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build/release")
    ap.add_argument("--mixes", type=int, default=24)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--control", action="store_true", help="also run each mix without priorities")
    ap.add_argument("--half", choices=["both", "choose", "check"], default="both")
    ap.add_argument("--only", default="",
                    help="mixes to run, by the number the table gives them (\"23,39\"): the same "
                         "mixes again, on another build or after a change")
    args = ap.parse_args()
    for tool in ["gpumux", "bench/gpumux_latency_tenant"]:
        if not os.access(os.path.join(args.build, tool), os.X_OK):
            sys.exit(f"priority_mixes: {args.build}/{tool} is missing: build first "
                     f"(cmake --preset release && cmake --build build/release)")
    rng = random.Random(args.seed)
    mixes = [draw_mix(rng, i) for i in range(args.mixes)]
    mixes = [m for m in mixes if args.half in ("both", m["half"])]
    if args.only:
        only = {int(n) for n in args.only.split(",")}
        mixes = [m for m in mixes if m["index"] in only]
    print("| mix | GPU mode | class | HP solo p50 / p99 | HP + BE: p99 (× solo) | on-device p99 × "
          "| first second p99 (solo) | after the change p99 (solo) | BE kept of what HP leaves "
          "(most whole kernels fill) |" + (" no priorities: p99 ×, BE kept |" if args.control
                                            else ""))
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if args.control else ""))
    rows = []
    for m in mixes:
        r = measure(args.build, m, args.seconds, args.rounds, args.control)
        rows.append(r)
        change = (f"{r['after_change_p99']:.2f} ({r['solo_after_change_p99']:.2f})"
                  if "/" in m["periods"] else "-")
        line = (f"| {r['mix']} | {r['mode']} | {r['class']} | {r['solo_p50']:.2f} / "
                f"{r['solo_p99']:.2f} ms | {r['p99']:.2f} ms ({r['p99_x']:.2f}×) "
                f"| {r['device_x']:.2f}× | {r['first_p99']:.2f} ({r['solo_first_p99']:.2f}) "
                f"| {change} | {r['be_kept']:.0%} ({r['most']:.0%}) |")
        if args.control:
            line += f" {r['control_x']:.2f}×, {r['control_be']:.0%} |"
        print(line, flush=True)
    print()
    print("| half | class | mixes | HP p99 × solo: median / worst | on-device: median / worst "
          "| BE kept: median / least | BE kept of the most whole kernels fill: median / least |")
    print("|---|---|---|---|---|---|---|")
    for half in ["choose", "check"]:
        for line in summary(rows, half):
            print(line)


if __name__ == "__main__":
    main()
