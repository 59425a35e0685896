"""Two PyTorch tenants for gpumux's real-GPU tail-latency check (bench/gpu/device_check.sh).

  steps.py hp START SECONDS PERIOD_MS KERNELS N [graph]
                                                  every PERIOD_MS, KERNELS N×N bf16 matmuls, then a
                                                  synchronise: prints step latency p50/p99 (ms);
                                                  graph: the step captured once as a CUDA graph
                                                  (torch.cuda.CUDAGraph) and replayed, as a
                                                  compiled server sends its step
  steps.py be START SECONDS N                     N×N bf16 matmuls back to back (synchronised every
                                                  10): prints matmuls per second
START is CLOCK_MONOTONIC ns (copies start together); the first second is not counted (the rhythm is learnt then).
"""
import json
import sys
import time

import torch

role, start, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
mono = lambda: time.clock_gettime_ns(time.CLOCK_MONOTONIC) / 1e9
if role == 'hp':
    period, kernels, n = float(sys.argv[4]) / 1e3, int(sys.argv[5]), int(sys.argv[6])
    graphed = len(sys.argv) > 7 and sys.argv[7] == 'graph'
else:
    n = int(sys.argv[4])
a = torch.randn(n, n, device='cuda', dtype=torch.bfloat16)
for _ in range(3):
    a @ a
torch.cuda.synchronize()
step_graph = None
if role == 'hp' and graphed:
    out = torch.empty_like(a)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as PyTorch asks before capture
        torch.matmul(a, a, out=out)
    torch.cuda.current_stream().wait_stream(side)
    step_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(step_graph):
        for _ in range(kernels):
            torch.matmul(a, a, out=out)
    torch.cuda.synchronize()
while mono() < start / 1e9:
    time.sleep(0.001)
t0 = mono()
end, warm = t0 + seconds, t0 + 1.0
if role == 'hp':
    lat, nxt = [], t0
    while mono() < end:
        s = mono()
        if step_graph is not None:
            step_graph.replay()
        else:
            for _ in range(kernels):
                a @ a
        torch.cuda.synchronize()
        if s > warm:
            lat.append((mono() - s) * 1e3)
        nxt += period
        time.sleep(max(0.0, nxt - mono()))
    lat.sort()
    print(json.dumps({'p50_ms': lat[len(lat) // 2], 'p99_ms': lat[int(len(lat) * 0.99)],
                      'steps': len(lat)}))
else:
    done, counted_from = 0, None
    while mono() < end:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()
        if mono() > warm:
            if counted_from is None:
                counted_from = mono()
            else:
                done += 10
    print(json.dumps({'matmuls_per_s': done / (mono() - counted_from)}))
