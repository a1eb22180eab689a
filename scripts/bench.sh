#!/usr/bin/env bash
# GPT-2 124M training on this machine: vktrain (configs/gpt2_124m.yaml on
# the chosen Vulkan device; lavapipe on a CPU) against PyTorch on the CPU
# (bench/torch_gpt2.py, Debian's python3-torch with OpenBLAS), in the same
# run, at batch 4 x 64 tokens and 1 x 1024. Both use 2 threads; both time
# full steps (forward, backward, clip, AdamW) after a warm-up (shader
# compilation on lavapipe), and /usr/bin/time gives each process's peak
# resident memory (lavapipe's device memory is host memory, so it counts).
# Prints a table with the ratios vktrain/PyTorch: of the tokens/s over the
# timed steps, and of the fastest timed step of each (bursts of other work
# on a shared machine only slow steps down, so the fastest steps compare
# the two at the machine's own speed; the means move with the load).
#
#   scripts/bench.sh [steps [warmup]]          (defaults: 4 timed, 2 warm-up)
# Environment: BENCH_SHAPES (default "4x64 1x1024"), BENCH_VOCAB (default
# 50257; smaller keeps the embedding under a device's binding limit),
# BENCH_BUILD (default build; built when it is the default).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-4}
warmup=${2:-2}
shapes=${BENCH_SHAPES:-4x64 1x1024}
vocab=${BENCH_VOCAB:-50257}
build=${BENCH_BUILD:-build}
scripts/deps.sh bench >/dev/null
[ "$build" = build ] && scripts/build.sh >/dev/null
[ -f data/examples/tokens_train_000.bin ] || /usr/bin/python3 scripts/gen_example_data.py >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

peak_mb() { awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$1"; }

echo "GPT-2 124M shape (dim 768, 12 layers, 12 heads, vocab $vocab, tied), fp32, 2 threads each"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
rows=()
for shape in $shapes; do
  B=${shape%x*} T=${shape#*x}
  run="$out/vk_${B}x$T"
  LP_NUM_THREADS=2 /usr/bin/time -v "$build/vktrain" train --config configs/gpt2_124m.yaml \
    model.vocab_size="$vocab" model.max_seq_len="$T" batch_size="$B" max_steps=$((warmup + steps)) \
    output_dir="$run" eval_every_n_steps=0 log_every_n_steps=1 > "$run.log" 2>&1 ||
    { echo "bench: vktrain failed at B=$B T=$T:" >&2; tail -5 "$run.log" >&2; exit 1; }
  read -r vk_tps vk_best < <(/usr/bin/python3 - "$run/metrics.jsonl" "$warmup" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2]):]
print("%.2f %.2f" % (sum(r["tokens"] for r in rows) / sum(r["step_ms"] for r in rows) * 1e3,
                     max(r["tokens"] / r["step_ms"] for r in rows) * 1e3))
PY
)
  # OPENBLAS_CORETYPE/L2_SIZE slow a current OpenBLAS: unset for this command.
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 \
    /usr/bin/time -v /usr/bin/python3 bench/torch_gpt2.py --batch "$B" --seq "$T" --vocab "$vocab" \
    --steps "$steps" --warmup "$warmup" --threads 2 > "$out/torch.log" 2>&1 ||
    { echo "bench: PyTorch failed at B=$B T=$T:" >&2; tail -5 "$out/torch.log" >&2; exit 1; }
  pt_tps=$(sed -n 's/^torch tokens\/s \([0-9.]*\).*/\1/p' "$out/torch.log")
  pt_best=$(sed -n 's/^torch fastest step tokens\/s \([0-9.]*\).*/\1/p' "$out/torch.log")
  rows+=("$B $T $vk_tps $pt_tps $(peak_mb "$run.log") $(peak_mb "$out/torch.log") $vk_best $pt_best")
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${rows[@]}" | awk '
  BEGIN { printf "| shape | vktrain tok/s | PyTorch tok/s | ratio | fastest steps, tok/s | ratio | vktrain peak MB | PyTorch peak MB | ratio |\n|---|---|---|---|---|---|---|---|---|\n" }
  { printf "| B=%s T=%s | %.1f | %.1f | %.2fx | %.1f / %.1f | %.2fx | %d | %d | %.2fx |\n", $1, $2, $3, $4, $3 / $4, $7, $8, $7 / $8, $5, $6, $5 / $6 }'
