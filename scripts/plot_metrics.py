#!/usr/bin/python3
"""Draws loss (and val_loss), lr and tokens/s from a vktrain metrics.jsonl.

usage: scripts/plot_metrics.py OUTPUT_DIR_or_metrics.jsonl [out.png]
Writes OUTPUT_DIR/metrics.png by default. Uses Debian's python3-matplotlib.
A value vktrain could not compute (a non-finite loss or norm) is null in
metrics.jsonl and a gap here; steps whose update was skipped are marked.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def num(v):
    """null (a non-finite value) -> NaN, which matplotlib leaves as a gap."""
    return float("nan") if v is None else v


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    src = sys.argv[1]
    path = os.path.join(src, "metrics.jsonl") if os.path.isdir(src) else src
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(path), "metrics.png")
    try:
        rows = [json.loads(line) for line in open(path) if line.strip()]
    except (OSError, ValueError) as e:
        sys.exit(f"plot_metrics: cannot read {path}: {e}")
    if not rows:
        sys.exit(f"plot_metrics: {path} has no metrics")
    step = [r["step"] for r in rows]
    fig, ax = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    ax[0].plot(step, [num(r["loss"]) for r in rows], label="train loss")
    val = [(r["step"], num(r["val_loss"])) for r in rows if "val_loss" in r]
    if val:
        ax[0].plot(*zip(*val), "o-", label="val loss")
    skipped = [r["step"] for r in rows if r.get("skipped")]
    for s in skipped:
        ax[0].axvline(s, color="red", alpha=0.3)
    if skipped:
        ax[0].plot([], [], color="red", alpha=0.3, label="update skipped (non-finite)")
    ax[0].set_ylabel("loss (nats/token)")
    ax[0].legend()
    ax[0].grid(alpha=0.3)
    ax[1].plot(step, [num(r["lr"]) for r in rows])
    ax[1].set_ylabel("learning rate")
    ax[1].grid(alpha=0.3)
    ax[2].plot(step, [num(r["tokens_per_sec"]) for r in rows])
    ax[2].set_ylabel("valid tokens / s")
    ax[2].set_xlabel("step")
    ax[2].grid(alpha=0.3)
    fig.suptitle(os.path.dirname(os.path.abspath(path)))
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"plot_metrics: wrote {out}")


if __name__ == "__main__":
    main()
