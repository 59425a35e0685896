#!/usr/bin/env python3
"""A lower bound on the unallocated GPU % any placement can reach on an openb trace at a given arrived %.

The stream is the artifact's (reference A.1, C2): the whole trace once, then clones drawn with
replacement until the GPU request reaches --arrived % of capacity (Python's RNG, not Go's: the
multiset matches the artifact's in distribution, not pod for pod). The bound relaxes everything
except packing within a GPU: no CPU, memory, node boundaries, gpu_spec or arrival order, and a
multi-GPU pod may take any whole GPUs. GPU packing is exact and integral (an arc-flow integer
program over 10-milli units, solved by CBC), and any pod may fail. `--placed-at-least 810:1050`
adds that at least 1050 of the 810-milli pods are placed, as a policy that places every pod it
can fit does with the ones that arrive before the fleet fills (FGD and gpumux place ~1050 of the
trace's 1078; check with `gpumux fleet simulate`).

Needs CBC (Debian: apt-get install coinor-cbc); not part of the build or the tests.
Example: bench/fleet_packing_bound.py traces/openb-v2023/openb_pod_list_default.csv --placed-at-least 810:1050
"""
import argparse
import collections
import csv
import random
import re
import subprocess
import tempfile
from pathlib import Path

UNITS = 100  # a GPU in 10-milli units; every sharing size in the openb traces is a multiple of 10


def stream(trace, gpus, arrived_pct, seed):
    pods = [(int(r["num_gpu"]), int(r["gpu_milli"])) for r in csv.DictReader(open(trace))]
    out, arrived, rng = list(pods), sum(n * m for n, m in pods), random.Random(seed)
    while arrived < arrived_pct / 100 * gpus * 1000:
        pod = rng.choice(pods)
        out.append(pod)
        arrived += pod[0] * pod[1]
    return out, arrived


def program(pods, gpus, at_least):
    sharing = collections.Counter(m // 10 for n, m in pods if n == 1 and 0 < m < 1000)
    whole = sum(n for n, m in pods if m == 1000)
    arcs = collections.defaultdict(list)  # tail -> [(variable, head)]
    integers = []
    for s in sharing:
        for i in range(UNITS - s + 1):
            arcs[i].append((f"x{s}_{i}", i + s))
    for i in range(UNITS):
        arcs[i].append((f"loss{i}", i + 1))
    into = collections.defaultdict(list)
    for tail, out in arcs.items():
        for v, head in out:
            into[head].append(v)
            integers.append(v)
    rows = [" src: " + " + ".join(v for v, _ in arcs[0]) + " - used = 0",
            " snk: " + " + ".join(into[UNITS]) + " - used = 0"]
    rows += [f" n{i}: " + " + ".join(v for v, _ in arcs[i]) + " - " + " - ".join(into[i]) + " = 0" for i in range(1, UNITS)]
    rows += [f" c{s}: " + " + ".join(f"x{s}_{i}" for i in range(UNITS - s + 1)) + f" - p{s} = 0" for s in sharing]
    rows.append(f" gpus: used + whole <= {gpus}")
    bounds = [f" {min(n, at_least.get(s * 10, 0))} <= p{s} <= {n}" for s, n in sharing.items()] + [f" 0 <= whole <= {whole}"]
    objective = " + ".join(f"{10 * s} p{s}" for s in sharing) + " + 1000 whole"
    names = integers + [f"p{s}" for s in sharing] + ["whole", "used"]
    return "\n".join(["Maximize", " alloc: " + objective, "Subject To", *rows, "Bounds", *bounds, "General", " " + " ".join(names), "End"]) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--gpus", type=int, default=6212, help="GPUs in the cluster (openb_node_list_gpu_node.csv: 6212)")
    ap.add_argument("--arrived", type=float, default=100.0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[42])
    ap.add_argument("--placed-at-least", action="append", default=[], metavar="MILLI:COUNT")
    a = ap.parse_args()
    at_least = {int(k): int(v) for k, v in (x.split(":") for x in a.placed_at_least)}
    for seed in a.seeds:
        pods, arrived = stream(a.trace, a.gpus, a.arrived, seed)
        with tempfile.TemporaryDirectory() as d:
            lp, sol = Path(d) / "bound.lp", Path(d) / "bound.sol"
            lp.write_text(program(pods, a.gpus, at_least))
            subprocess.run(["cbc", str(lp), "solve", "solu", str(sol)], check=True, capture_output=True)
            status = sol.read_text().splitlines()[0]
        if not status.startswith("Optimal"):
            raise SystemExit(f"seed {seed}: CBC did not prove optimality: {status}")
        alloc = float(re.search(r"objective value\s+([-\d.e+]+)", status).group(1))
        print(f"seed {seed}: arrived {100 * arrived / (a.gpus * 1000):.2f}%, {len(pods)} pods: "
              f"unallocated >= {100 - 100 * alloc / (a.gpus * 1000):.3f}%")


if __name__ == "__main__":
    main()
