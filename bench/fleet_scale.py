#!/usr/bin/env python3
"""How the fleet simulator's cost grows with the fleet (issue 44): the default openb trace and
copies of it with nodes and pods repeated K times (each copy's names made unique), one seed, one
core, every policy; wall time and peak memory per run, and the exponent of time against GPUs
fitted over the scales (n log n reads as a little over 1, n^2 as 2). With --baseline, each
policy also runs with --scan-every-node (every node checked and scored for every pod, as before
the candidate index; the same placements), and the table gives ours / that at each scale, both
measured in this run.

Usage (from the repository root, after a build):
  bench/fleet_scale.py [--scales 1,4,16] [--policies random,...,gpumux] [--traces DIR] [--baseline]
"""
import argparse
import csv
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

ALL_POLICIES = "random,dotprod,clustering,packing,bestfit,fgd,gpumux"


def copies(src, dst, k, name_field):
    """Writes `src` repeated `k` times into `dst`, copy c's `name_field` suffixed '-c<c>'."""
    with open(src, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    col = header.index(name_field)
    with open(dst, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for c in range(k):
            for row in body:
                row = list(row)
                if c:
                    row[col] = f"{row[col]}-c{c}"
                w.writerow(row)
    return len(body) * k


def gpus_in(nodes_csv):
    with open(nodes_csv, newline="") as f:
        return sum(int(r["gpu"]) for r in csv.DictReader(f))


def run(binary, nodes, pods, policy, out, scan=False):
    """Seconds and peak resident MiB of one `gpumux fleet simulate` run."""
    cmd = [binary, "fleet", "simulate", "--nodes", nodes, "--pods", pods, "--policy", policy,
           "--seeds", "1", "--jobs", "1", "--out", out] + (["--scan-every-node"] if scan else [])
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - start
    if status != 0:
        sys.exit(f"{' '.join(cmd)} failed: {proc.stderr.read().decode()[-500:]}")
    return seconds, usage.ru_maxrss / 1024.0


def slope(xs, ys):
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scales", default="1,4,16")
    p.add_argument("--policies", default=ALL_POLICIES)
    p.add_argument("--traces", default="traces/openb-v2023")
    p.add_argument("--gpumux", default="./build/release/gpumux")
    p.add_argument("--baseline", action="store_true",
                   help="also time --scan-every-node runs and print ours / that")
    a = p.parse_args()
    scales = [int(s) for s in a.scales.split(",")]
    policies = a.policies.split(",")
    work = tempfile.mkdtemp(prefix="gpumux-fleet-scale-")
    inputs = {}
    for k in scales:
        nodes, pods = f"{work}/nodes-x{k}.csv", f"{work}/pods-x{k}.csv"
        copies(f"{a.traces}/openb_node_list_gpu_node.csv", nodes, k, "sn")
        n_pods = copies(f"{a.traces}/openb_pod_list_default.csv", pods, k, "name")
        inputs[k] = (nodes, pods, gpus_in(nodes), n_pods)
    print("| policy | " + " | ".join(f"x{k} ({inputs[k][2]} GPUs)" for k in scales) +
          " | exponent (time vs GPUs) |")
    print("|---|" + "---|" * len(scales) + "---|")
    for policy in policies:
        cells, times = [], []
        for k in scales:
            nodes, pods, _, _ = inputs[k]
            seconds, mib = run(a.gpumux, nodes, pods, policy, f"{work}/out-{policy}-x{k}")
            times.append(seconds)
            cell = f"{seconds:.2f} s, {mib:.0f} MiB"
            if a.baseline:
                scan_s, scan_mib = run(a.gpumux, nodes, pods, policy, f"{work}/scan-{policy}-x{k}",
                                       scan=True)
                cell += f" (scan {scan_s:.2f} s, {scan_mib:.0f} MiB: {seconds / scan_s:.2f}x)"
            cells.append(cell)
        exponent = slope([inputs[k][2] for k in scales], times) if len(scales) > 1 else float("nan")
        print(f"| {policy} | " + " | ".join(cells) + f" | {exponent:.2f} |", flush=True)
    gpus = [inputs[k][2] for k in scales]
    if len(scales) > 1:
        nlogn = slope(gpus, [g * math.log(g) for g in gpus])
        print(f"\nn log n over these sizes reads as exponent {nlogn:.2f}; n^2 as 2.00.")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
