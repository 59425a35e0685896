"""A decode-like PyTorch program for gpumux's real-GPU checks (bench/gpu/device_check.sh).

Random bf16 weights shaped like an LLM's (every layer's q, k, v, o, gate, up and down projections,
and the LM head); one step runs them all at `--batch` rows, as a decoder's step does at batch B
(attention over a KV cache is left out), and ends with an argmax read back to the host, as an
engine's sampling does. Steps run back to back from `--start` (CLOCK_MONOTONIC ns, so that copies
start together) for `--seconds`; prints one JSON line: steps_per_s, tokens_per_s (steps × batch),
weight_bytes. `--hidden-override 128` keeps the layer count but shrinks every matrix: the step
time is then the program's fixed time per step (launches, the host's Python), which the prediction
takes as the step overhead.
"""
import argparse
import json
import time

import torch

p = argparse.ArgumentParser()
p.add_argument('--layers', type=int, required=True)
p.add_argument('--hidden', type=int, required=True)
p.add_argument('--kv', type=int, required=True, help='width of k and v (kv_heads × head_dim)')
p.add_argument('--inter', type=int, required=True)
p.add_argument('--vocab', type=int, required=True)
p.add_argument('--batch', type=int, default=1)
p.add_argument('--seconds', type=float, default=4)
p.add_argument('--start', type=int, default=0)
p.add_argument('--hidden-override', type=int, default=0)
a = p.parse_args()
if a.hidden_override:
    scale = a.hidden_override / a.hidden
    a.hidden, a.kv = a.hidden_override, max(8, int(a.kv * scale))
    a.inter, a.vocab = max(8, int(a.inter * scale)), max(8, int(a.vocab * scale))

dev, dt = 'cuda', torch.bfloat16
def w(rows, cols):
    return torch.randn(rows, cols, device=dev, dtype=dt) * 0.02
layers = [dict(q=w(a.hidden, a.hidden), k=w(a.hidden, a.kv), v=w(a.hidden, a.kv),
               o=w(a.hidden, a.hidden), g=w(a.hidden, a.inter), u=w(a.hidden, a.inter),
               d=w(a.inter, a.hidden)) for _ in range(a.layers)]
head = w(a.hidden, a.vocab)
weight_bytes = sum(t.numel() * 2 for l in layers for t in l.values()) + head.numel() * 2
x0 = torch.randn(a.batch, a.hidden, device=dev, dtype=dt)

def step():
    x = x0
    for l in layers:
        q, k, v = x @ l['q'], x @ l['k'], x @ l['v']
        x = x + q @ l['o'] + (k.sum() + v.sum()) * 0
        x = x + (torch.nn.functional.silu(x @ l['g']) * (x @ l['u'])) @ l['d']
    return int((x @ head).argmax())

for _ in range(3):
    step()
torch.cuda.synchronize()
while time.clock_gettime_ns(time.CLOCK_MONOTONIC) < a.start:
    time.sleep(0.001)
n, t0 = 0, time.time()
while time.time() < t0 + a.seconds:
    step()
    n += 1
elapsed = time.time() - t0
print(json.dumps({'steps_per_s': n / elapsed, 'tokens_per_s': n * a.batch / elapsed,
                  'weight_bytes': weight_bytes}))
