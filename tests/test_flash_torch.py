"""test_flash_torch: op_flash_attention (forward and backward, no T x T
buffer) against PyTorch at long sequences, T = 1024 and 2048.

For each case the test draws q, k, v and the output gradient in float32,
writes them as raw files, and runs $TOOLS/flash_driver once per kernel
family (texel, as lavapipe uses; tiled, as GPUs use; VKTRAIN_KERNELS
selects it), which writes out, the per-row log-sum-exp and dq, dk, dv.
PyTorch computes the same attention its own way, in float64 from the same
float32 values: scores q.k^T/sqrt(hd) with a causal (and, with documents,
same-document) mask as -inf, torch.softmax, out = P.v, lse =
torch.logsumexp, and the gradients by autograd, with grouped-query heads
through repeat_interleave.

Tolerance, per tensor: max|vk - torch| <= 2e-5 * max|torch| + 1e-7. The
shaders run in float32 against a float64 oracle; the worst seen is 1.6e-6
relative (dk at T = 2048), so 2e-5 leaves 12x room for other devices'
exp and summation. A wrong mask, scale or head mapping gives errors of
1e-2 or more. Negative control: the document case compared with
torch's plain causal attention (documents ignored) must fail, so the test
cannot pass by comparing nothing."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

RTOL, ATOL = 2e-5, 1e-7
KERNELS = ("texel", "tiled")
# B, T, H, KVH, hd, documents
CASES = ((1, 1024, 2, 1, 64, True), (1, 2048, 1, 1, 64, False))


def reference(q, k, v, dout, doc):
    """out, lse, dq, dk, dv in float64; q (B,T,H,hd), k/v (B,T,KVH,hd)."""
    B, T, H, hd = q.shape
    group = H // k.shape[2]
    qt = torch.tensor(q, dtype=torch.float64, requires_grad=True)
    kt = torch.tensor(k, dtype=torch.float64, requires_grad=True)
    vt = torch.tensor(v, dtype=torch.float64, requires_grad=True)
    qh = qt.permute(0, 2, 1, 3)                                   # (B,H,T,hd)
    kh = kt.permute(0, 2, 1, 3).repeat_interleave(group, dim=1)
    vh = vt.permute(0, 2, 1, 3).repeat_interleave(group, dim=1)
    scores = qh @ kh.transpose(-1, -2) / hd ** 0.5                # (B,H,T,T)
    allowed = torch.ones(T, T, dtype=torch.bool).tril()[None]
    if doc is not None:
        d = torch.tensor(doc)
        allowed = allowed & (d[:, :, None] == d[:, None, :])
    scores = scores.masked_fill(~allowed[:, None], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)                         # (B,H,T)
    out = (torch.softmax(scores, dim=-1) @ vh).permute(0, 2, 1, 3)
    out.backward(torch.tensor(dout, dtype=torch.float64))
    return {"out": out.detach().numpy(), "lse": lse.detach().numpy(), "dq": qt.grad.numpy(),
            "dk": kt.grad.numpy(), "dv": vt.grad.numpy()}


def run_driver(work, kernels, B, T, H, KVH, hd, has_doc):
    env = dict(os.environ, VKTRAIN_KERNELS=kernels)
    cmd = [os.path.join(os.environ["TOOLS"], "flash_driver"), work] + [str(x) for x in (B, T, H, KVH, hd, int(has_doc))]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    sys.stderr.write(r.stderr)
    if r.returncode:
        sys.exit(f"flash_driver failed ({r.returncode})")
    shapes = {"out": (B, T, H, hd), "lse": (B, H, T), "dq": (B, T, H, hd), "dk": (B, T, KVH, hd),
              "dv": (B, T, KVH, hd)}
    return {n: np.fromfile(os.path.join(work, n + ".bin"), dtype=np.float32).reshape(s) for n, s in shapes.items()}


def compare(got, want):
    """Names of the tensors outside the tolerance, and one line per tensor."""
    bad, lines = [], []
    for name, w in want.items():
        g = got[name].astype(np.float64)
        err, scale = np.abs(g - w).max(), np.abs(w).max()
        nerr = ((g - w) ** 2).sum() / max((w ** 2).sum(), 1e-300)
        ok = err <= RTOL * scale + ATOL
        lines.append(f"  {name:4s} max|diff| {err:.3g} (scale {scale:.3g}, {err / scale:.2g} relative), "
                     f"normalized error {nerr:.2g}{'' if ok else '  FAIL'}")
        if not ok:
            bad.append(name)
    return bad, lines


def main():
    rng = np.random.default_rng(5)
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        for B, T, H, KVH, hd, has_doc in CASES:
            q = rng.uniform(-1, 1, (B, T, H, hd)).astype(np.float32)
            k = rng.uniform(-1, 1, (B, T, KVH, hd)).astype(np.float32)
            v = rng.uniform(-1, 1, (B, T, KVH, hd)).astype(np.float32)
            dout = rng.uniform(-1, 1, (B, T, H, hd)).astype(np.float32)
            doc = None
            if has_doc:  # documents of random lengths, ids rising along each row
                doc = np.cumsum(rng.uniform(0, 1, (B, T)) < 0.004, axis=1).astype(np.int32)
                doc.tofile(os.path.join(work, "doc.bin"))
            for name, x in (("q", q), ("k", k), ("v", v), ("dout", dout)):
                x.tofile(os.path.join(work, name + ".bin"))
            want = reference(q, k, v, dout, doc)
            for kernels in KERNELS:
                got = run_driver(work, kernels, B, T, H, KVH, hd, has_doc)
                bad, lines = compare(got, want)
                print(f"{kernels} B={B} T={T} H={H} KVH={KVH} hd={hd} documents={has_doc}")
                print("\n".join(lines))
                failures += len(bad)
                if has_doc and kernels == KERNELS[0]:
                    control, _ = compare(got, reference(q, k, v, dout, None))
                    print(f"  negative control (documents ignored by torch): {len(control)} tensors differ")
                    if not control:
                        print("  FAIL: the comparison accepts attention across documents")
                        failures += 1
    if failures:
        sys.exit(f"test_flash_torch: {failures} mismatches")
    print("test_flash_torch: all tensors within tolerance")


if __name__ == "__main__":
    main()
