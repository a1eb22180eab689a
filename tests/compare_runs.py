#!/usr/bin/python3
"""compare_runs: do two or more vktrain output dirs hold the same trajectory?

usage: compare_runs.py [--loss-rel X] [--norm-rel X] [--weight-rel X] [--from-step S] [--exact]
                       DIR_A DIR_B [DIR_C ...]

Compares every other run with the first: the metrics.jsonl rows (same steps
and token counts, loss within --loss-rel relative, grad_norm within
--norm-rel), and, when every dir has a final model.safetensors, each
tensor: max|a - b| <= weight_rel * (max |w| over the whole model).

Weights are compared on the model's scale, not each tensor's: an entry
whose exact gradient is 0 (GPT-2's key bias: softmax ignores a shift shared
by all keys) gets only rounding noise as gradient, and AdamW, dividing by
sqrt(v), turns that noise into updates whose size does not shrink with it,
so such entries legitimately differ between summation orders by a small
fraction of lr per step. Prints one line per run and exits 1 on any
mismatch. --exact asks for the same trajectory bit for bit: the logged
loss and grad_norm equal as written, every weight of model.safetensors and
every tensor of the last checkpoint's optimizer.safetensors equal in all
32 bits. A null (a non-finite value vktrain wrote as null) must be null
in both runs. Used by the shell tests.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (path, name, t["dtype"])
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(t["shape"])
    return out


def metrics(d, from_step):
    rows = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl")) if l.strip()]
    return [r for r in rows if r["step"] >= from_step]


def last_optimizer(d):
    """The path of the newest checkpoint's optimizer.safetensors in run dir d."""
    steps = [int(n[5:]) for n in os.listdir(os.path.join(d, "checkpoints")) if n.startswith("step_")]
    return os.path.join("checkpoints", "step_%d" % max(steps), "optimizer.safetensors")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--loss-rel", type=float, default=1e-5)
    ap.add_argument("--norm-rel", type=float, default=1e-4)
    ap.add_argument("--weight-rel", type=float, default=1e-4)
    ap.add_argument("--from-step", type=int, default=1)
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    ok = True
    base = metrics(a.dirs[0], a.from_step)
    models = [os.path.join(d, "model.safetensors") for d in a.dirs]
    have_models = all(os.path.exists(m) for m in models)
    w0 = read_safetensors(models[0]) if have_models else None
    scale = max(float(np.abs(v).max()) for v in w0.values()) if have_models else 0.0
    for d in a.dirs[1:]:
        rows = metrics(d, a.from_step)
        worst_l = worst_g = 0.0
        same = len(rows) == len(base) and len(rows) > 0
        for x, y in zip(base, rows):
            same &= x["step"] == y["step"] and x["tokens"] == y["tokens"] and x.get("skipped") == y.get("skipped")
            for k in ("loss", "grad_norm"):  # null: not finite; it must be null in both
                same &= (x[k] is None) == (y[k] is None)
            if x["loss"] is not None and y["loss"] is not None:
                worst_l = max(worst_l, abs(x["loss"] - y["loss"]) / abs(x["loss"]))
            if x["grad_norm"] is not None and y["grad_norm"] is not None:
                worst_g = max(worst_g, abs(x["grad_norm"] - y["grad_norm"]) / max(x["grad_norm"], 1e-12))
        if a.exact:
            good = same and worst_l == 0 and worst_g == 0 and have_models
            for name in ("model.safetensors", last_optimizer(a.dirs[0])):
                x, y = read_safetensors(os.path.join(a.dirs[0], name)), read_safetensors(os.path.join(d, name))
                good &= set(x) == set(y) and all(x[k].tobytes() == y[k].tobytes() for k in x)
            print(("ok   " if good else "FAIL ") + f"{d}: {len(rows)} steps, bit for bit: the logged losses and "
                  f"norms, model.safetensors and {last_optimizer(a.dirs[0])}")
            ok &= good
            continue
        good = same and worst_l < a.loss_rel and worst_g < a.norm_rel
        msg = f"{d}: {len(rows)} steps, loss rel {worst_l:.1e}, grad norm rel {worst_g:.1e}"
        if have_models:
            w = read_safetensors(os.path.join(d, "model.safetensors"))
            worst_w = 0.0
            good &= set(w) == set(w0)
            for k in w0:
                if k in w:
                    diff = float(np.abs(w0[k].astype(np.float64) - w[k]).max())
                    worst_w = max(worst_w, diff / scale)
                    good &= diff <= a.weight_rel * scale
            msg += f", weights rel {worst_w:.1e}"
        print(("ok   " if good else "FAIL ") + msg)
        ok &= good
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
