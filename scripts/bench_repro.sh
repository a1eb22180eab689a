#!/usr/bin/env bash
# The cost of precision: reproducible (docs/reproducible.md): trains the
# default recipe's model (and its gpt2 shape) for a few steps in
# precision: fp32 and precision: reproducible, alternating the two (fp32
# first in odd rounds, reproducible first in even ones) so both see the
# same machine, and reports the tokens/s of each (the median over the
# steps after the first, which builds the pipelines, of all rounds) and
# the ratio reproducible / fp32 (the target: >= 0.8), and the ratio of
# each mode's fastest step.
# usage: scripts/bench_repro.sh [steps [rounds [archs]]]   (default 6 2 "llama gpt2")
# VKTRAIN=path/to/vktrain skips the build; LP_NUM_THREADS as for any run.
# Then bench_ops: the elementwise kernels of both modes, one by one.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-6}
rounds=${2:-2}
archs=${3:-llama gpt2}
if [ -z "${VKTRAIN:-}" ]; then
  scripts/deps.sh train >/dev/null
  scripts/build.sh >/dev/null
  VKTRAIN=build/vktrain
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(--config configs/default.yaml max_steps="$steps" eval_every_n_steps=0 log_every_n_steps=1)
for arch in $archs; do
  shape=()
  [ "$arch" = gpt2 ] && shape=(model.arch=gpt2 model.n_kv_heads=4)
  for r in $(seq 1 "$rounds"); do
    order="fp32 reproducible"
    [ $((r % 2)) = 0 ] && order="reproducible fp32"
    for p in $order; do
      dir="$out/$arch-$p-$r"
      "$VKTRAIN" train "${common[@]}" "${shape[@]}" precision="$p" output_dir="$dir" > "$dir.log" 2>&1 ||
        { echo "bench_repro: the $arch run with precision: $p failed:" >&2; tail -5 "$dir.log" >&2; exit 1; }
    done
  done
done
/usr/bin/python3 - "$out" "$rounds" "$archs" <<'PY'
import json, sys
out, rounds, archs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def steps(d):  # tokens/s of each step after the first (which builds the pipelines)
    rows = [json.loads(l) for l in open(f"{out}/{d}/metrics.jsonl")][1:]
    return [r["tokens"] / (r["step_ms"] * 1e-3) for r in rows]
def median(xs):
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2
print(f"configs/default.yaml, {rounds} round(s) of each mode, tokens/s after the first step: the median of the "
      f"steps (bursts of other work on a shared machine slow some steps), and each round's mean; 'fastest': "
      f"each mode's fastest step (other work only ever slows a step, so their ratio compares the two at the "
      f"machine's own speed)")
for arch in archs:
    fp32 = [steps(f"{arch}-fp32-{r}") for r in range(1, rounds + 1)]
    repro = [steps(f"{arch}-reproducible-{r}") for r in range(1, rounds + 1)]
    f, p = median(sum(fp32, [])), median(sum(repro, []))
    rounds_of = lambda runs: " ".join(f"{sum(x) / len(x):.0f}" for x in runs)
    ff, pf = max(sum(fp32, [])), max(sum(repro, []))
    print(f"{arch:5s}  fp32 {f:8.0f} tok/s  reproducible {p:8.0f} tok/s  ratio {p / f:5.2f}  "
          f"fastest {ff:.0f} / {pf:.0f}  ratio {pf / ff:5.2f}  "
          f"(round means: {rounds_of(fp32)}; {rounds_of(repro)})")
PY
# The elementwise kernels alone, both modes alternated call by call
# (bench/bench_ops.c), where the build has them.
ops="$(dirname "$VKTRAIN")/bench/bench_ops"
[ -x "$ops" ] && "$ops"
exit 0
