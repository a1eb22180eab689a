"""test_train_parity_torch: whole training steps of `vktrain train` against an
independent PyTorch computation of the same steps.

For each architecture (llama: untied, GQA 4/2; gpt2: tied), a random model
(vocab 259, dim 32, 2 layers, 4 heads, hidden 64, max_seq_len 32) is drawn in
PyTorch and written as an HF-style directory (model.safetensors +
config.json) that the recipe starts from (model.init_from). The data is an
sft_jsonl file of 8 {"prompt", "response"} samples of very different lengths
(6 to 33 tokens, one exactly max_seq_len + 1; 2 to 31 valid labels, N = 111):
prompts are masked, and with packed: false every micro-batch is padded to
its longest sample. With shuffle: false and W·A·B = 8, every step trains on
the same 8 samples, the whole dataset.

vktrain runs 4 steps of AdamW (lr 1e-2 constant, no warmup, betas
(0.9, 0.95), eps 1e-8, weight_decay 0.1 on parameters with >= 2 dims) with
clip_grad_norm 1.0, for (A, B) = (1, 8), (2, 4), (4, 2), (8, 1)
(gradient_accumulation_steps, batch_size), under both kernel families
(VKTRAIN_KERNELS=texel and tiled), and in precision: reproducible at
(A, B) = (2, 4) under both families (the same checks, and the two families'
weights bit-identical). PyTorch runs the same 4 steps its own
way: each sample at its own length (no padding), tokenized as docs/data.md
says (BOS + prompt bytes + response bytes + EOS; inputs t[:-1], labels t[1:];
labels predicting prompt bytes -100), loss = sum of cross-entropy over every
valid label of the 8 samples / N, autograd, clip_grad_norm_ (its returned
pre-clip norm is the reference grad_norm), torch.optim.AdamW with two param
groups, all in float32. The model code is tests/parity_torch_model.py, shared
with test_parity_torch.py (which checks one forward/backward through the
shaders); transformers is not imported.

Checked for every (arch, kernels, A, B): metrics.jsonl has steps 1..4 with
lr = 1e-2 and tokens = N exactly; clipping is active at step 1 (grad_norm > 1;
here it is > 1 at all 4 steps, 1.7 to 6.8);
  loss:      |vk - torch| / torch < 1e-5 at every step   (worst seen 1.6e-7);
  grad_norm: |vk - torch| / torch < 1e-4 at every step   (worst seen 6.3e-7);
  weights:   per tensor of OUTPUT_DIR/model.safetensors (the set of HF names
             must equal torch's) max|vk - torch| <= 1e-4 * max|torch| + 1e-6
             (worst seen 0.18 of the bound), normalized error
             sum((vk-torch)^2)/sum(torch^2) printed beside it (<= 5e-12).
Why these: both sides are float32 and differ only in summation order (shader
tiles, padded micro-batches, a double host sum of per-tensor squares vs BLAS
blocks and per-sample graphs); one forward/backward agrees to ~1e-6 relative
(test_parity_torch), so the step-1 loss and norm agree to ~1e-7. Later steps
carry the noise on through AdamW, whose step lr * m̂ / (sqrt(v̂) + eps) has
size ~lr whatever the gradient's: an entry whose gradient is near zero
(e.g. 1e-5 where the tensor's largest is 0.1, changing sign between steps)
has its update decided partly by rounding, which is the 1.2e-5 weight gap
seen (llama o_proj, A = 8). The loss and the norm, sums over all entries,
feel this only in second order, so 1e-5 and 1e-4 leave 60-150x room, and the
weight bound 5x; a wrong update in any entry (one step moves it by ~lr =
1e-2, at least 60x any tensor's bound) cannot pass.

Left out of the weight comparison: gpt2's key bias, c_attn.bias[D:2D] of
each layer (see noise_only). Its exact gradient is zero (q·(k_j + b) shifts
every score of a query by the same q·b, which the softmax ignores); both
sides compute ~4e-9 of rounding noise, which AdamW turns into steps of up to
lr of random sign, so vktrain and torch end up 2-3e-3 apart on those entries
alone (torch against itself with the 8 samples summed in reverse order:
1e-3 there, while every other entry agrees to < 0.01 of the bound). Those
entries cannot change any output; they are only checked to stay within
AdamW's bound of 1.01·STEPS·lr from the initial value on both sides.

Teeth: for every A > 1, PyTorch also runs the NAIVE trajectory that averages
per micro-batch (loss = mean over micro-batches m of x_m/n_m, micro-batch m
holding samples m·B .. m·B+B-1, as docs/data.md assigns them with W = 1), and
the test asserts vktrain does NOT match it: the step-1 loss (same weights,
different objective) and the step-1 grad norm must each differ by more than
the tolerance (seen: loss 1.6e-2 to 8.8e-2, norm 6.2e-2 to 1.9e-1 relative,
i.e. >= 1600x and >= 600x the tolerances), the whole-trajectory criterion
must reject it, and so must the weight criterion (seen: 1800-2900x the
bound). So a trainer that averaged per micro-batch would fail this test.

torch is imported once; the 16 training runs take ~10 s on lavapipe."""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

from parity_torch_model import BOS, EOS, forward, hf_config, random_params, read_safetensors, write_safetensors

STEPS, LR, BETAS, EPS, WD, MAX_NORM = 4, 1e-2, (0.9, 0.95), 1e-8, 0.1, 1.0
SPLITS = [(1, 8), (2, 4), (4, 2), (8, 1)]  # (gradient_accumulation_steps, batch_size), W·A·B = 8
LOSS_RTOL, NORM_RTOL, W_RTOL, W_ATOL = 1e-5, 1e-4, 1e-4, 1e-6
# Both kernel families (VKTRAIN_KERNELS): texel reads, as CPU drivers use, and
# shared-memory tiles, as GPUs use; each runs on any device.
KERNELS = ("texel", "tiled")

ARCHS = {
    "llama": {"arch": "llama", "dim": 32, "layers": 2, "heads": 4, "kv_heads": 2, "hidden": 64, "max_seq_len": 32,
              "eps": 1e-5, "theta": 10000.0, "tied": False},
    "gpt2": {"arch": "gpt2", "dim": 32, "layers": 2, "heads": 4, "hidden": 64, "max_seq_len": 32, "eps": 1e-5},
}

# 8 samples, file order = step order (shuffle: false). Lengths in tokens
# (BOS + prompt + response + EOS) are uneven, and so are the micro-batches:
# with (A, B) = (2, 4) the first holds 4 short answers, the second 4 long ones.
SAMPLES = [
    ("Hi", "yo"),
    ("2+2=", "4"),
    ("Name a color: ", "red"),
    ("Say ok", "ok!"),
    ("Q:", "the quick brown fox jumps ov"),
    ("Spell: ", "a b c d e f g h i j"),
    ("x", "lorem ipsum dolor sit amet, co"),  # 1 + 1 + 30 + 1 = 33 = max_seq_len + 1 tokens
    ("Count: ", "1 2 3 4 5 6 7 8 9"),
]


# ---------------------------------------------------------------- data


def tokenize(prompt, response, train_on_input=False):
    """docs/data.md, sft_jsonl: t = BOS + prompt bytes + response bytes + EOS;
    inputs t[:-1], labels t[1:] (shifted once); labels predicting prompt
    bytes are -100 unless train_on_input; response bytes and EOS are trained."""
    p, r = list(prompt.encode()), list(response.encode())
    t = np.array([BOS] + p + r + [EOS], np.int64)
    labels = t[1:].copy()
    if not train_on_input:
        labels[: len(p)] = -100  # label j predicts t[j + 1]; t[1..len(p)] is the prompt
    return t[:-1], labels


# ---------------------------------------------------------------- torch


def torch_train(c, init, data, groups):
    """STEPS steps of the recipe on every sample in `data` each step. groups:
    None for the exact objective (Σ CE over all valid labels / N), or the
    micro-batches (lists of sample indices) for the naive one that averages
    per micro-batch. Returns per step (loss, pre-clip grad norm, N) and the
    final weights (HF name -> numpy)."""
    params = {k: torch.nn.Parameter(v.clone()) for k, v in init.items()}
    opt = torch.optim.AdamW([{"params": [p for p in params.values() if p.dim() >= 2], "weight_decay": WD},
                             {"params": [p for p in params.values() if p.dim() < 2], "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS)
    history = []
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        sums, counts = [], []
        for x, lab in data:
            L = len(x)
            logits = forward(c, params, torch.from_numpy(x)[None], torch.arange(L)[None],
                             torch.ones(L, L, dtype=torch.bool).tril()[None])[0]
            lab_t = torch.from_numpy(lab)
            sums.append(torch.nn.functional.cross_entropy(logits, lab_t, ignore_index=-100, reduction="sum"))
            counts.append(int((lab_t != -100).sum()))
        N = sum(counts)
        if groups is None:
            loss = torch.stack(sums).sum() / N
        else:
            loss = torch.stack([torch.stack([sums[k] for k in g]).sum() / sum(counts[k] for k in g)
                                for g in groups]).mean()
        loss.backward()
        norm = float(torch.nn.utils.clip_grad_norm_(list(params.values()), MAX_NORM))
        opt.step()
        history.append((float(loss), norm, N))
    return history, {k: p.detach().numpy().copy() for k, p in params.items()}


# ---------------------------------------------------------------- vktrain


def run_vktrain(work, model_dir, data_path, A, B, kernels, out, extra=()):
    recipe = os.path.join(work, "recipe.yaml")
    if not os.path.exists(recipe):
        with open(recipe, "w") as f:
            f.write(f"""seed: 1
output_dir: unset
model: {{init_from: {model_dir}}}
dataset: {{type: sft_jsonl, path: {data_path}, packed: false, shuffle: false, train_on_input: false}}
batch_size: 8
gradient_accumulation_steps: 1
max_steps: {STEPS}
optimizer: {{lr: {LR!r}, betas: [{BETAS[0]!r}, {BETAS[1]!r}], eps: {EPS!r}, weight_decay: {WD!r}}}
lr_scheduler: {{type: constant, warmup_steps: 0}}
clip_grad_norm: {MAX_NORM!r}
log_every_n_steps: 1
""")
    cmd = [os.environ["VKTRAIN"], "train", "--config", recipe, f"output_dir={out}",
           f"gradient_accumulation_steps={A}", f"batch_size={B}", *extra]
    env = dict(os.environ, VKTRAIN_KERNELS=kernels)
    env.setdefault("LP_NUM_THREADS", "2")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.stdout.write(r.stdout + r.stderr)
        print(f"  FAIL vktrain exited {r.returncode}: {' '.join(cmd)}")
        return None
    with open(os.path.join(out, "metrics.jsonl")) as f:
        metrics = [json.loads(line) for line in f if line.strip()]
    return metrics, read_safetensors(os.path.join(out, "model.safetensors"))


# ---------------------------------------------------------------- compare


def rel(a, b):
    return abs(a - b) / abs(b)


def trajectory_matches(metrics, ref):
    """The test's criterion on losses and grad norms, and the worst relative errors."""
    dl = max(rel(m["loss"], r[0]) for m, r in zip(metrics, ref))
    dg = max(rel(m["grad_norm"], r[1]) for m, r in zip(metrics, ref))
    return dl < LOSS_RTOL and dg < NORM_RTOL, dl, dg


def noise_only(c):
    """Entries whose gradient is exactly zero in exact arithmetic, so that
    both sides update them only by AdamW-normalized rounding noise: gpt2's
    key bias, c_attn.bias[D:2D]. A query's scores q·(k_j + b) = q·k_j + q·b
    shift by the same q·b for every key j, which the softmax ignores; the
    computed gradient is ~1e-9 of noise (torch and vktrain alike), and
    m/sqrt(v) turns noise into steps of up to lr of either sign. These entries
    cannot change any output, so they are left out of the weight comparison
    and only checked to have moved no more than AdamW's bound of ~STEPS·lr
    (|m̂/sqrt(v̂)| <= 1.002 for t <= 4 with betas (0.9, 0.95))."""
    if c["arch"] != "gpt2":
        return {}
    D = c["dim"]
    return {f"h.{i}.attn.c_attn.bias": slice(D, 2 * D) for i in range(c["layers"])}


def compare_weights(got, want, init, skip):
    """Per tensor: (name, max|d|, bound, normalized error); names must agree.
    Entries in skip[name] (noise_only) are compared to the AdamW bound
    instead: max|w - init| <= 1.01 * STEPS * LR on both sides."""
    rows = []
    for k, w in want.items():
        g = np.asarray(got[k], np.float64)
        w = np.asarray(w, np.float64)
        if g.shape != w.shape:
            rows.append((k, float("inf"), 0.0, float("inf")))
            continue
        if k in skip:
            w0 = init[k].numpy().astype(np.float64)
            moved = max(float(np.abs(x[skip[k]] - w0[skip[k]]).max()) for x in (g, w))
            if not moved <= 1.01 * STEPS * LR:
                rows.append((k + f"[{skip[k].start}:{skip[k].stop}] (noise-only)", moved, 1.01 * STEPS * LR, 0.0))
            keep = np.ones(w.shape, bool)
            keep[skip[k]] = False
            g, w = g[keep], w[keep]
        d = float(np.abs(g - w).max())
        rows.append((k, d, W_RTOL * float(np.abs(w).max()) + W_ATOL, float(((g - w) ** 2).sum() / (w ** 2).sum())))
    return rows


def check_run(arch, c, kernels, A, B, metrics, weights, init, ref, ref_w, naive, naive_w):
    """Prints the table of one (arch, A, B) run; returns the failures."""
    fails = []
    print(f"\n{arch} [{kernels} kernels]  A={A} B={B}  (W·A·B = 8, micro-batches of {B} padded to their "
          "longest sample)")
    print(f"  {'step':>4} {'loss vktrain':>14} {'loss torch':>14} {'rel':>8}   {'grad_norm vk':>13} "
          f"{'grad_norm torch':>15} {'rel':>8}   {'tokens':>6}" + (
              f"   {'naive loss':>11} {'rel':>8} {'naive gn':>9} {'rel':>8}" if naive else ""))
    if [m.get("step") for m in metrics] != list(range(1, STEPS + 1)):
        fails.append(f"metrics.jsonl steps {[m.get('step') for m in metrics]}, want 1..{STEPS}")
        return fails
    for m, r, i in zip(metrics, ref, range(STEPS)):
        line = (f"  {m['step']:>4} {m['loss']:>14.8f} {r[0]:>14.8f} {rel(m['loss'], r[0]):>8.1e}   "
                f"{m['grad_norm']:>13.7f} {r[1]:>15.7f} {rel(m['grad_norm'], r[1]):>8.1e}   {m['tokens']:>6g}")
        if naive:
            n = naive[i]
            line += f"   {n[0]:>11.7f} {rel(m['loss'], n[0]):>8.1e} {n[1]:>9.5f} {rel(m['grad_norm'], n[1]):>8.1e}"
        print(line)
        if m["tokens"] != r[2]:
            fails.append(f"step {m['step']}: tokens {m['tokens']}, torch N {r[2]}")
        if rel(m["lr"], LR) > 1e-12:
            fails.append(f"step {m['step']}: lr {m['lr']!r}, want {LR!r} (constant, no warmup)")
    if not ref[0][1] > MAX_NORM or not metrics[0]["grad_norm"] > MAX_NORM:
        fails.append(f"step 1: grad norm {metrics[0]['grad_norm']:g} (torch {ref[0][1]:g}) does not exceed "
                     f"clip_grad_norm {MAX_NORM:g}: clipping is not exercised")
    ok, dl, dg = trajectory_matches(metrics, ref)
    if not ok:
        fails.append(f"trajectory: worst loss rel {dl:.2e} (tol {LOSS_RTOL:g}), grad_norm rel {dg:.2e} "
                     f"(tol {NORM_RTOL:g})")

    if set(weights) != set(ref_w):
        fails.append(f"model.safetensors names: only vktrain {sorted(set(weights) - set(ref_w))}, "
                     f"only torch {sorted(set(ref_w) - set(weights))}")
    skip = noise_only(c)
    rows = compare_weights(weights, {k: v for k, v in ref_w.items() if k in weights}, init, skip)
    bad = [r for r in rows if not r[1] <= r[2]]
    worst = max(rows, key=lambda r: r[1] / r[2])
    print(f"  final weights, {len(rows)} tensors: worst {worst[0]}: max|d| {worst[1]:.2e} <= bound {worst[2]:.2e} "
          f"({worst[1] / worst[2]:.3f} of it); worst normalized error {max(r[3] for r in rows):.1e}"
          + (f"; {len(skip)} noise-only key-bias slices within the AdamW bound" if skip else ""))
    for k, d, bound, nerr in bad:
        fails.append(f"weight {k}: max|d| {d:.3e} > {bound:.3e} (nerr {nerr:.2e})")

    if naive:
        # Teeth: the same criterion must reject the per-micro-batch mean.
        nok, ndl, ndg = trajectory_matches(metrics, naive)
        d1l, d1g = rel(metrics[0]["loss"], naive[0][0]), rel(metrics[0]["grad_norm"], naive[0][1])
        print(f"  naive per-micro-batch mean: step-1 loss rel {d1l:.1e} (tol {LOSS_RTOL:g}), step-1 grad_norm "
              f"rel {d1g:.1e} (tol {NORM_RTOL:g}); criterion {'MATCHES (bad)' if nok else 'rejects it (good)'}")
        nrows = compare_weights(weights, {k: v for k, v in naive_w.items() if k in weights}, init, skip)
        nworst = max(r[1] / r[2] for r in nrows)
        print(f"  naive final weights: worst max|d| is {nworst:.0f}x the bound "
              f"({'rejected (good)' if nworst > 1 else 'ACCEPTED (bad)'})")
        if nok or not d1l > LOSS_RTOL or not d1g > NORM_RTOL or not nworst > 1:
            fails.append(f"teeth: vktrain is within tolerance of the naive per-micro-batch mean "
                         f"(step-1 loss rel {d1l:.1e}, grad_norm rel {d1g:.1e}, weights {nworst:.2g}x bound)")
    for f in fails:
        print(f"  FAIL {f}")
    if not fails:
        print("  ok")
    return fails


def main():
    torch.set_default_dtype(torch.float32)
    t_start = time.time()
    data = [tokenize(p, r) for p, r in SAMPLES]
    for (p, r), (x, lab) in zip(SAMPLES, data):
        assert len(x) + 1 <= 33 and (lab != -100).sum() == len(r.encode()) + 1, (p, r)
    gen = torch.Generator().manual_seed(5)
    failures, vk_seconds = [], 0.0
    with tempfile.TemporaryDirectory(prefix="train_parity_") as work:
        data_path = os.path.join(work, "sft.jsonl")
        with open(data_path, "w") as f:
            for p, r in SAMPLES:
                f.write(json.dumps({"prompt": p, "response": r}) + "\n")
        for arch, c in ARCHS.items():
            init = random_params(c, gen)
            model_dir = os.path.join(work, f"init_{arch}")
            os.makedirs(model_dir)
            write_safetensors(os.path.join(model_dir, "model.safetensors"), {k: v.numpy() for k, v in init.items()})
            with open(os.path.join(model_dir, "config.json"), "w") as f:
                json.dump(hf_config(c), f, indent=2)
            arch_work = os.path.join(work, arch)
            os.makedirs(arch_work)
            ref, ref_w = torch_train(c, init, data, None)
            # The naive trajectory per split: micro-batch m holds samples m·B .. m·B+B-1.
            naive = {(A, B): torch_train(c, init, data, [list(range(m * B, (m + 1) * B)) for m in range(A)])
                     for A, B in SPLITS if A > 1}
            for kernels in KERNELS:
                for A, B in SPLITS:
                    t0 = time.time()
                    res = run_vktrain(arch_work, model_dir, data_path, A, B, kernels,
                                      os.path.join(arch_work, f"out_{kernels}_{A}x{B}"))
                    vk_seconds += time.time() - t0
                    name = f"{arch} [{kernels}] A={A} B={B}"
                    if res is None:
                        failures.append(f"{name}: vktrain failed")
                        continue
                    naive_ab = naive.get((A, B), (None, None))
                    for f in check_run(arch, c, kernels, A, B, *res, init, ref, ref_w, *naive_ab):
                        failures.append(f"{name}: {f}")
            # precision: reproducible (its own kernels, one sequence per pass,
            # the tree over samples): the same tolerances against torch, and
            # the same bits from both kernel families.
            repro_w = {}
            for kernels in KERNELS:
                t0 = time.time()
                res = run_vktrain(arch_work, model_dir, data_path, 2, 4, kernels,
                                  os.path.join(arch_work, f"out_{kernels}_reproducible"), ["precision=reproducible"])
                vk_seconds += time.time() - t0
                name = f"{arch} [{kernels}, reproducible] A=2 B=4"
                if res is None:
                    failures.append(f"{name}: vktrain failed")
                    continue
                for f in check_run(arch, c, kernels, 2, 4, *res, init, ref, ref_w, *naive.get((2, 4), (None, None))):
                    failures.append(f"{name}: {f}")
                repro_w[kernels] = res[1]
            if len(repro_w) == len(KERNELS):
                a, b = (repro_w[k] for k in KERNELS)
                same = a.keys() == b.keys() and all(np.array_equal(a[k].view(np.uint32), b[k].view(np.uint32)) for k in a)
                print(f"  {arch} reproducible: {' and '.join(KERNELS)} weights bit-identical: {same}")
                if not same:
                    failures.append(f"{arch} reproducible: the kernel families' weights differ in their bits")
    print(f"\ntest_train_parity_torch: {len(ARCHS)} archs x {len(KERNELS)} kernel families x {len(SPLITS)} splits x "
          f"{STEPS} steps; tolerances "
          f"loss rel {LOSS_RTOL:g}, grad_norm rel {NORM_RTOL:g}, weights max|d| <= {W_RTOL:g}*max|w| + {W_ATOL:g}; "
          f"{time.time() - t_start:.1f} s ({vk_seconds:.1f} s in vktrain); "
          f"{'FAILED:' if failures else 'all passed'}")
    for f in failures:
        print(f"  {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
