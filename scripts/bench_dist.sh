#!/usr/bin/env bash
# Data-parallel scaling on this machine: the default recipe's model for a
# few steps with W=1 (LP_NUM_THREADS=2) and W=2 (one thread each, overlap
# on and off), the same global batch. Reports mean step time (first step
# excluded), communication share and scaling efficiency
# (throughput W=2 / throughput W=1: both runs use the same two cores).
# usage: scripts/bench_dist.sh [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh train >/dev/null
scripts/build.sh >/dev/null
steps=${1:-8}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--config configs/default.yaml max_steps="$steps" eval_every_n_steps=0 log_every_n_steps=1)
LP_NUM_THREADS=2 build/vktrain train "${common[@]}" output_dir="$out/w1" > "$out/w1.log" 2>&1
for ov in true false; do
  LP_NUM_THREADS=1 mpirun --oversubscribe -np 2 -x LP_NUM_THREADS build/vktrain train "${common[@]}" \
    output_dir="$out/w2_$ov" batch_size=8 dist.overlap=$ov > "$out/w2_$ov.log" 2>&1
done
/usr/bin/python3 - "$out" <<'PY'
import json, re, sys
out = sys.argv[1]
def mean_ms(d):
    rows = [json.loads(l) for l in open(f"{out}/{d}/metrics.jsonl")][1:]
    return sum(r["step_ms"] for r in rows) / len(rows), sum(r["tokens"] for r in rows) / len(rows)
def comm(d):
    m = re.search(r"communication: ([0-9.]+)% of step time \(([0-9.]+) ms", open(f"{out}/{d}.log").read())
    return (float(m.group(1)), float(m.group(2))) if m else (0.0, 0.0)
w1, tok = mean_ms("w1")
print(f"global batch 16 x 128 tokens, {tok:.0f} valid tokens per step, default recipe model")
print(f"W=1 (2 lavapipe threads):          {w1:8.1f} ms/step  {tok / w1 * 1e3:8.0f} tok/s")
for ov in ("true", "false"):
    ms, _ = mean_ms(f"w2_{ov}")
    share, cms = comm(f"w2_{ov}")
    print(f"W=2 (1 thread each), overlap {ov:5s}: {ms:8.1f} ms/step  {tok / ms * 1e3:8.0f} tok/s  "
          f"communication {share:4.1f}% ({cms:.1f} ms/step)  scaling efficiency {w1 / ms:5.2f}")
PY
