"""test_parity_torch: vktrain's shaders against an independent PyTorch
implementation of the same models, on the same Hugging Face files.

For each case the test draws a random model in PyTorch, writes it as
model.safetensors + config.json with Hugging Face names, shapes and config
keys (GPT-2 Conv1D weights (in, out); "transformer."-prefixed in one case, as
GPT2LMHeadModel.save_pretrained writes them), and a batch of B=3 rows of
BOS + prompt + response + EOS samples of different lengths: padded with
<|pad|> (258) to the longest row, or packed several to a row with document
ids (block-causal attention, positions restarting per document). Labels are
-100 on padding and on every position that predicts a prompt token.
$TOOLS/parity_driver runs one forward and backward through the shaders
(dlogits scaled by 1/N, N the valid labels) and dumps loss, count, logits and
every parameter gradient in HF layout; it runs once per kernel family (texel,
as lavapipe uses, and tiled, as GPUs use; VKTRAIN_KERNELS selects it).
PyTorch computes the same thing its own way: each sample at its own length
with positions 0..L-1 and a plain causal mask, loss = sum of cross-entropy
over valid labels / N in float32, gradients by autograd. The logits of
padding rows, which no sample defines, are compared with a forward of the
whole padded batch under the same mask the model uses.
The torch model is written out plainly in parity_torch_model.py, shared
with test_train_parity_torch.py (RMSNorm, RoPE with HF rotate_half and
inv_freq = 1/theta^(arange(0,hd,2)/hd) in float32, GQA via repeat_kv,
SwiGLU; LayerNorm, learned positions, Conv1D, GELU tanh; tied and untied
heads); transformers is not imported.

Tolerance, per tensor (logits, loss, each gradient):
    max|vk - torch| <= 1e-4 * max|torch| + 1e-7
Both sides are float32 with different summation orders (the shaders reduce in
tiles, torch in BLAS blocks), so the honest gap is a few float32 ulps of the
tensor's scale: the worst seen is 2.3e-6 relative. 1e-4 leaves 40x room for
rounding accumulated through two layers and the softmax, while a wrong
convention (RoPE pairing or inv_freq, GQA head mapping, LayerNorm variance,
the 1/N scale) gives errors of 1e-2 to 1; even exact-erf GELU in place of
the tanh form, the subtlest slip tried, shows 2e-4 on the logits and 5e-4 on
the MLP gradients and fails. The 1e-7 floor only matters for a tensor that
is exactly zero. The normalized error mse(vk, torch)/mse(torch, 0) is
printed beside it (the op tests' measure; ~1e-12 here). The valid-token
count must match exactly. A negative control checks that the comparison
rejects the same llama under the other (interleaved, GPT-J) RoPE pairing, so
the test cannot pass by comparing nothing.

With an argument, f16 or bf16, it checks the matmuls on 16-bit inputs
(cooperative matrices: the parity driver runs with VKTRAIN_MATMUL_INPUTS set
to it) against the torch model with the linear layers' operands rounded the
same way (parity_torch_model.MATMUL_INPUTS: both operands of every product,
forward and backward, to nearest even; sums in float32). The rounding turns
a float32-sized difference between the two sides into a whole 16-bit step
wherever a value lies near a rounding boundary, and such steps spread
through the layers, so the criterion is the normalized error per tensor:
    mse(vk, torch16) / mse(torch16, 0) <= NERR16 (f16 1e-6, bf16 6.4e-5)
(worst seen with f16 on Debian unstable's lavapipe: 2.7e-7; bf16's steps are
8 times f16's, so its bound is 64 times) and the loss within LOSS16 (f16
5e-5, bf16 3e-3; worst seen 1.1e-5). Teeth: over all gradients of a case
as one vector, vktrain's normalized error against the rounded model must
be at most RATIO16 = 0.25 of the rounding's own effect (the rounded model
against the float32 one): a kernel that did not round, or rounded
otherwise, is as far from the rounded model as that effect or farther.
Seen with f16: 0.02 to 0.1. The interleaved-RoPE control must fail as
above. tests/test_coopmat_sid.sh
runs it with f16, scripts/gpu_check.sh with bf16 on a GPU that has them.

Runs every case in one process (torch is imported once) and exits non-zero on
any mismatch, after printing one line per tensor."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

import parity_torch_model
from parity_torch_model import (BOS, EOS, PAD, VOCAB, forward, hf_config, random_params,
                                read_safetensors, rope_interleaved, write_safetensors)

RTOL, ATOL = 1e-4, 1e-7
# 16-bit matmul inputs (argument f16 or bf16): the type's name, or None
INPUTS = None
NERR16 = {"f16": 1e-6, "bf16": 6.4e-5}
LOSS16 = {"f16": 5e-5, "bf16": 3e-3}
RATIO16 = 0.25
# Both kernel families: texel-buffer reads (CPU drivers such as lavapipe)
# and shared-memory tiling (GPUs); each runs on any device.
KERNELS = ("texel", "tiled")


# ---------------------------------------------------------------- batch


def make_batch(rows, T, gen):
    """rows: per row a list of (length, prompt_len) samples; a sample is
    BOS + prompt + response + EOS of length+1 tokens (inputs t[:-1], labels
    t[1:], labels predicting prompt tokens -100). Returns the [B, T] arrays
    and, per sample, (row, start, inputs, labels) for the per-sample reference."""
    B = len(rows)
    tokens = np.full((B, T), PAD, np.int64)
    labels = np.full((B, T), -100, np.int64)
    pos = np.tile(np.arange(T), (B, 1))
    doc = np.zeros((B, T), np.int64)
    samples = []
    for r, row in enumerate(rows):
        start = 0
        for d, (n, prompt) in enumerate(row):
            body = torch.randint(0, 256, (n - 1,), generator=gen).numpy()
            t = np.concatenate(([BOS], body, [EOS]))
            lab = t[1:].copy()
            lab[: prompt - 1] = -100  # labels predicting prompt[1:] (BOS is prompt[0])
            tokens[r, start:start + n], labels[r, start:start + n] = t[:-1], lab
            pos[r, start:start + n], doc[r, start:start + n] = np.arange(n), d
            samples.append((r, start, t[:-1], lab))
            start += n
        doc[r, start:] = len(row)  # padding is a document of its own
        assert start <= T
    return tokens, labels, pos, doc, samples


# ---------------------------------------------------------------- compare


def compare(name, got, want, expect_match=True):
    """Prints one line for the tensor; True if it is within tolerance (or,
    for a negative control, outside it as expected)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        print(f"  FAIL {name}: shape {got.shape}, torch {want.shape}")
        return False
    diff = float(np.abs(got - want).max()) if got.size else 0.0
    scale = float(np.abs(want).max()) if want.size else 0.0
    den = float((want ** 2).sum())
    nerr = float(((got - want) ** 2).sum()) / den if den > 0 else float(((got - want) ** 2).sum())
    if INPUTS is None:
        within = diff <= RTOL * scale + ATOL
    elif name == "loss":
        within = diff <= LOSS16[INPUTS] * scale
    else:
        within = nerr <= NERR16[INPUTS]
    ok = (bool(np.isfinite(got).all()) and within) == expect_match
    print(f"  {'ok  ' if ok else 'FAIL'} {name:<58} max|d| {diff:9.3e}  max|torch| {scale:9.3e}  "
          f"rel {diff / scale if scale else diff:9.3e}  nerr {nerr:9.3e}")
    return ok


def run_driver(d, kernels):
    """parity_driver on d's model and batch with one kernel family; the dump, or None."""
    out = os.path.join(d, f"out_{kernels}.safetensors")
    r = subprocess.run([os.path.join(os.environ["TOOLS"], "parity_driver"), d, os.path.join(d, "batch.safetensors"),
                        out], capture_output=True, text=True,
                       env=dict(os.environ, VKTRAIN_KERNELS=kernels, VKTRAIN_MATMUL_INPUTS=INPUTS or "fp32"))
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != 0:
        print(f"  FAIL parity_driver exited {r.returncode}")
        return None
    return read_safetensors(out)


def torch_reference(c, params, tokens, labels, pos, doc, samples, packed):
    """Loss, valid count, logits (B*T, V) and gradients, computed per sample."""
    # Each sample alone, at its own length, positions 0..L-1, plain causal mask.
    leaves = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    B, T = tokens.shape
    logits = torch.zeros(B, T, VOCAB)
    loss_sum, n_valid = torch.zeros(()), 0
    for row, start, x, lab in samples:
        L = len(x)
        causal = torch.ones(L, L, dtype=torch.bool).tril()[None]
        lg = forward(c, leaves, torch.from_numpy(x)[None], torch.arange(L)[None], causal)[0]
        lab_t = torch.from_numpy(lab)
        loss_sum = loss_sum + torch.nn.functional.cross_entropy(lg, lab_t, ignore_index=-100, reduction="sum")
        n_valid += int((lab_t != -100).sum())
        logits[row, start:start + L] = lg.detach()
    loss = loss_sum / n_valid
    loss.backward()

    # Padding rows, which no sample defines: the whole batch under the mask
    # the model uses (causal, and block-causal by document when packed).
    mask = torch.ones(T, T, dtype=torch.bool).tril()[None].repeat(B, 1, 1)
    if packed:
        dd = torch.from_numpy(doc)
        mask &= dd[:, :, None] == dd[:, None, :]
    full_args = (torch.from_numpy(tokens), torch.from_numpy(pos), mask)
    with torch.no_grad():
        full = forward(c, params, *full_args)
    is_pad = torch.ones(B, T, dtype=torch.bool)
    for row, start, x, _ in samples:
        is_pad[row, start:start + len(x)] = False
    logits[is_pad] = full[is_pad]
    # On real tokens the padded batch gives the per-sample logits (what lets a
    # padded micro-batch stand for its samples): a torch-side sanity check.
    # (16-bit inputs: within a few of their steps, which the rounding of
    # values that the padded batch sums in another order can move)
    tol = (1e-4, 1e-5) if INPUTS is None else (3e-2, 3e-3)
    assert torch.allclose(full[~is_pad], logits[~is_pad], rtol=tol[0], atol=tol[1]), "torch: padding changes logits"
    grads = {k: v.grad.numpy() for k, v in leaves.items()}
    return float(loss), n_valid, logits.reshape(B * T, VOCAB).numpy(), grads, full_args


def run_case(tmp, case, gen):
    c, name = case["config"], case["name"]
    params = random_params(c, gen)
    d = os.path.join(tmp, name.replace(" ", "_").replace("/", "-"))
    os.makedirs(d)
    prefix = case.get("file_prefix", "")
    write_safetensors(os.path.join(d, "model.safetensors"), {prefix + k: v.numpy() for k, v in params.items()})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(hf_config(c), f, indent=2)
    tokens, labels, pos, doc, samples = make_batch(case["rows"], case["T"], gen)
    batch = {"tokens": tokens, "labels": labels, "positions": pos}
    if case["packed"]:
        batch["doc_ids"] = doc
    write_safetensors(os.path.join(d, "batch.safetensors"), {k: v.astype(np.float32) for k, v in batch.items()})
    loss, n_valid, logits, grads, full_args = torch_reference(c, params, tokens, labels, pos, doc, samples,
                                                              case["packed"])
    grads32 = None
    if INPUTS is not None:  # the teeth: the same model without the rounding
        parity_torch_model.MATMUL_INPUTS = None
        grads32 = torch_reference(c, params, tokens, labels, pos, doc, samples, case["packed"])[3]
        parity_torch_model.MATMUL_INPUTS = TORCH_TYPES[INPUTS]
    assert int((labels != -100).sum()) == n_valid

    ok = True
    for kernels in KERNELS:
        print(f"{name} [{kernels} kernels]:")
        vk = run_driver(d, kernels)
        if vk is None:
            ok = False
            continue
        if int(vk["count"][0]) != n_valid:
            print(f"  FAIL count: vktrain {vk['count'][0]:g}, torch {n_valid}")
            ok = False
        else:
            print(f"  ok   count {n_valid}")
        ok &= compare("loss", vk["loss"], np.array([loss]))
        ok &= compare("logits", vk["logits"], logits)
        names = {k[len("grad."):] for k in vk if k.startswith("grad.")}
        if names != set(params):
            print(f"  FAIL gradient names: only vktrain {sorted(names - set(params))}, "
                  f"only torch {sorted(set(params) - names)}")
            ok = False
        for k in params:
            if k in names:
                ok &= compare("grad." + k, vk["grad." + k], grads[k])
        if grads32 is not None:
            # all gradients as one vector: vktrain against the rounded
            # model, and the rounding's own effect (rounded against float32)
            keys = sorted(k for k in params if k in names)
            flat = lambda d, p="": np.concatenate([np.asarray(d[p + k], np.float64).ravel() for k in keys])
            vkg, g16, g32 = flat(vk, "grad."), flat(grads), flat(grads32)
            to16 = float(((vkg - g16) ** 2).sum() / (g16 ** 2).sum())
            effect = float(((g16 - g32) ** 2).sum() / (g16 ** 2).sum())
            near = to16 <= RATIO16 * effect
            print(f"  {'ok  ' if near else 'FAIL'} all gradients: nerr against the {INPUTS} model {to16:.2e}, "
                  f"the rounding's own effect {effect:.2e} ({to16 / effect:.3f} of it, at most {RATIO16:g})")
            ok &= near
        if case.get("negative_control"):
            # The comparison must reject the same model under the interleaved RoPE.
            with torch.no_grad():
                wrong = forward(c, params, *full_args, rope=rope_interleaved)
            ok &= compare("negative control: logits, interleaved RoPE (must differ)", vk["logits"],
                          wrong.reshape(-1, VOCAB).numpy(), expect_match=False)
    return ok


def llama(**kw):
    c = {"arch": "llama", "dim": 32, "layers": 2, "heads": 4, "kv_heads": 2, "hidden": 64, "max_seq_len": 16,
         "eps": 1e-5, "theta": 10000.0, "tied": False}
    c.update(kw)
    return c


def gpt2(**kw):
    c = {"arch": "gpt2", "dim": 32, "layers": 2, "heads": 4, "hidden": 64, "max_seq_len": 16, "eps": 1e-5}
    c.update(kw)
    return c


PADDED = [[(13, 4)], [(8, 3)], [(5, 2)]]  # one sample a row, padded to T = 13
PACKED = [[(9, 3), (7, 2)], [(5, 2), (6, 4), (3, 1)], [(12, 5)]]  # two rows end in padding

CASES = [
    {"name": "llama untied GQA 4/2 padded", "config": llama(), "rows": PADDED, "T": 13, "packed": False,
     "negative_control": True},
    {"name": "llama tied MHA 4/4 padded theta 5e5", "config": llama(kv_heads=4, tied=True, theta=500000.0, eps=1e-6),
     "rows": PADDED, "T": 13, "packed": False},
    {"name": "llama tied GQA 4/1 packed", "config": llama(kv_heads=1, tied=True), "rows": PACKED, "T": 16,
     "packed": True},
    {"name": "gpt2 padded (transformer. prefix)", "config": gpt2(), "rows": PADDED, "T": 13, "packed": False,
     "file_prefix": "transformer."},
    {"name": "gpt2 packed", "config": gpt2(), "rows": PACKED, "T": 16, "packed": True},
    # Qwen3: heads wider than dim / heads (4 x 16 = 64 against dim 32) with
    # RMSNorm over each head of q and k before RoPE; mistral's narrower ones
    {"name": "qwen3 q/k norms head_dim 16 GQA 4/2 packed", "config": llama(head_dim=16, qk_norm=True, eps=1e-6),
     "rows": PACKED, "T": 16, "packed": True},
    {"name": "mistral head_dim 4 tied padded", "config": llama(head_dim=4, tied=True), "rows": PADDED, "T": 13,
     "packed": False},
]


TORCH_TYPES = {"f16": torch.float16, "bf16": torch.bfloat16}


def main():
    global INPUTS
    if len(sys.argv) > 1:
        if sys.argv[1] not in TORCH_TYPES:
            sys.exit(f"usage: {sys.argv[0]} [f16|bf16]")
        INPUTS = sys.argv[1]
        parity_torch_model.MATMUL_INPUTS = TORCH_TYPES[INPUTS]
    torch.set_default_dtype(torch.float32)
    gen = torch.Generator().manual_seed(20240520)
    failed = []
    with tempfile.TemporaryDirectory(prefix="parity_") as tmp:
        for case in CASES:
            if not run_case(tmp, case, gen):
                failed.append(case["name"])
    crit = (f"tolerance max|d| <= {RTOL:g}*max|torch| + {ATOL:g}" if INPUTS is None else
            f"{INPUTS} matmul inputs, tolerance nerr <= {NERR16[INPUTS]:g}, loss rel <= {LOSS16[INPUTS]:g}")
    print(f"test_parity_torch: {crit}; "
          f"{len(CASES)} cases x {len(KERNELS)} kernel families, "
          f"{'FAILED: ' + ', '.join(failed) if failed else 'all passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
