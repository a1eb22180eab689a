"""test_optim_torch: vktrain's optimizer pieces against PyTorch itself.

Two parameter tensors, a (37, 13) matrix with weight decay 0.1 and a (13,)
bias without, get 5 steps of given random gradients and a scheduled lr.
PyTorch runs torch.nn.utils.clip_grad_norm_(max_norm=1) and
torch.optim.AdamW(betas=(0.9, 0.95), eps=1e-8) with the two param groups;
tests/tools/adamw_driver runs grad_norm_record/grad_norm_total/
grad_clip_factor and op_adamw on the same inputs. Steps 1-3 have gradients
whose norm exceeds max_norm (clipping active), steps 4-5 smaller ones.

Tolerances (fp32 on both sides; torch's CPU kernels may fuse into fma where
vktrain rounds each operation, and torch computes the norm in float where
vktrain sums in double):
  grad_norm and clip factor: relative 1e-6;
  θ, exp_avg, exp_avg_sq: max|vk − torch| / max|torch| < 1e-6 per tensor
  after every step."""
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

BETAS, EPS, MAX_NORM, STEPS = (0.9, 0.95), 1e-8, 1.0, 5
SHAPES, DECAY = [(37, 13), (13,)], [0.1, 0.0]
LRS = [1e-3 * (s + 1) / 2 if s < 2 else 1e-3 * (0.5 + 0.5 * np.cos(np.pi * (s - 2) / 3)) for s in range(STEPS)]
TOL = 1e-6


def main():
    rng = np.random.default_rng(5)
    theta0 = [rng.uniform(-1, 1, size=s).astype(np.float32) for s in SHAPES]
    grads = [[(rng.standard_normal(s) * (0.5 if step < 3 else 0.01)).astype(np.float32) for s in SHAPES]
             for step in range(STEPS)]

    # torch
    params = [torch.nn.Parameter(torch.from_numpy(t.copy())) for t in theta0]
    opt = torch.optim.AdamW([{"params": [p], "weight_decay": wd} for p, wd in zip(params, DECAY)],
                            lr=LRS[0], betas=BETAS, eps=EPS)
    want = []
    for step in range(STEPS):
        for p, gr in zip(params, grads[step]):
            p.grad = torch.from_numpy(gr.copy())
        norm = float(torch.nn.utils.clip_grad_norm_(params, MAX_NORM))
        for group in opt.param_groups:
            group["lr"] = LRS[step]
        opt.step()
        states = [(p.detach().numpy().copy(), opt.state[p]["exp_avg"].numpy().copy(),
                   opt.state[p]["exp_avg_sq"].numpy().copy()) for p in params]
        want.append((norm, min(1.0, MAX_NORM / (norm + 1e-6)), states))

    # vktrain
    with tempfile.TemporaryDirectory() as d:
        inp, outp = os.path.join(d, "in.bin"), os.path.join(d, "out.bin")
        with open(inp, "wb") as f:
            f.write(struct.pack("<II4d", len(SHAPES), STEPS, BETAS[0], BETAS[1], EPS, MAX_NORM))
            for t, wd in zip(theta0, DECAY):
                f.write(struct.pack("<Id", t.size, wd) + t.astype("<f4").tobytes())
            for step in range(STEPS):
                f.write(struct.pack("<d", LRS[step]))
                for gr in grads[step]:
                    f.write(gr.astype("<f4").tobytes())
        exe = os.path.join(os.environ["TOOLS"], "adamw_driver")
        subprocess.run([exe, inp, outp], check=True)
        with open(outp, "rb") as f:
            buf = f.read()

    failures, off, worst = 0, 0, 0.0
    for step in range(STEPS):
        norm, clip = struct.unpack_from("<2d", buf, off)
        off += 16
        wnorm, wclip, states = want[step]
        for name, got, exp in (("grad_norm", norm, wnorm), ("clip", clip, wclip)):
            rel = abs(got - exp) / abs(exp)
            if rel > TOL:
                print(f"step {step + 1}: {name} {got!r} vs torch {exp!r} (rel. {rel:.3g})")
                failures += 1
        for k, shape in enumerate(SHAPES):
            n = int(np.prod(shape))
            for j, what in enumerate(("theta", "exp_avg", "exp_avg_sq")):
                got = np.frombuffer(buf, dtype="<f4", count=n, offset=off).reshape(shape)
                off += 4 * n
                exp = states[k][j]
                rel = float(np.max(np.abs(got.astype(np.float64) - exp)) / np.max(np.abs(exp)))
                worst = max(worst, rel)
                if rel > TOL:
                    print(f"step {step + 1}: tensor {k} {what}: max rel. error {rel:.3g} > {TOL}")
                    failures += 1
        print(f"step {step + 1}: lr {LRS[step]:.6g} grad_norm {norm:.7g} (torch {wnorm:.7g}) clip {clip:.7g}")
    assert off == len(buf), f"driver wrote {len(buf)} bytes, expected {off}"
    print(f"max rel. state error vs torch: {worst:.3g} (tolerance {TOL})")
    if failures:
        print(f"test_optim_torch: {failures} checks failed")
        return 1
    print("test_optim_torch: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
