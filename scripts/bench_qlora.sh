#!/usr/bin/env bash
# LoRA over an NF4 base against LoRA over a bf16 base, in the same run on
# the same device (lavapipe on a CPU): a llama shape (dim 512, 4 layers, 8
# heads with 4 kv, MLP 1536, vocab 4096, tied), rank-16 adapters on every
# linear layer, batch 4 x 128, trained alternately with
# model.base_dtype bf16 and nf4 (and nf4 with model.nf4_double_quant)
# ROUNDS times. Prints each run's tokens/s over its timed steps (after the
# warm-up, which compiles the shaders) and the ratios nf4/bf16 of the means
# and of the fastest steps (bursts of other work only slow steps down);
# then the frozen-weight matmuls alone, nt and nn, per storage.
#
#   scripts/bench_qlora.sh [steps [warmup [rounds]]]   (defaults: 4, 2, 2)
# Environment: BENCH_BUILD (default build; built when it is the default).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-4}
warmup=${2:-2}
rounds=${3:-2}
build=${BENCH_BUILD:-build}
[ "$build" = build ] && scripts/build.sh >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for i in $(seq 1 2000); do echo "the $((i % 7)) quick brown foxes jump over $((i * 13 % 11)) lazy dogs"; done > "$out/corpus.txt"
cat > "$out/recipe.yaml" <<YAML
seed: 3
model: {arch: llama, dim: 512, n_heads: 8, n_kv_heads: 4, hidden_dim: 1536, n_layers: 4, max_seq_len: 128,
        vocab_size: 4096, tie_embeddings: true}
dataset: {type: text, path: $out/corpus.txt, packed: true}
batch_size: 4
max_steps: $((warmup + steps))
optimizer: {lr: 1.0e-3}
log_every_n_steps: 1
eval_every_n_steps: 0
save_every_n_steps: 0
lora: {rank: 16, targets: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]}
YAML
echo "LoRA r16 over a frozen base: bf16 against NF4, llama dim 512 x 4 layers, batch 4 x 128, $(nproc) CPUs"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'); $(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # name keys...: "mean best" tokens/s of its timed steps
  local name=$1; shift
  LP_NUM_THREADS=${LP_NUM_THREADS:-2} "$build/vktrain" train --config "$out/recipe.yaml" output_dir="$out/$name" \
    overwrite=true "$@" > "$out/$name.log" 2>&1 || { echo "bench_qlora: $name failed:" >&2; tail -5 "$out/$name.log" >&2; exit 1; }
  /usr/bin/python3 - "$out/$name/metrics.jsonl" "$warmup" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"step_ms"' in l][int(sys.argv[2]):]
print("%.1f %.1f" % (sum(r["tokens"] for r in rows) / sum(r["step_ms"] for r in rows) * 1e3,
                     max(r["tokens"] / r["step_ms"] for r in rows) * 1e3))
PY
}
declare -A mean best
for kind in bf16 nf4 nf4dq; do mean[$kind]=0 best[$kind]=0; done
for r in $(seq 1 "$rounds"); do
  for kind in bf16 nf4 nf4dq; do
    case $kind in
      bf16) keys=(model.base_dtype=bf16) ;;
      nf4) keys=(model.base_dtype=nf4) ;;
      nf4dq) keys=(model.base_dtype=nf4 model.nf4_double_quant=true) ;;
    esac
    read -r m b < <(run "$kind" "${keys[@]}")
    printf '  round %d %-6s %8.1f tokens/s (fastest step %8.1f)\n' "$r" "$kind" "$m" "$b"
    mean[$kind]=$(/usr/bin/python3 -c "print(${mean[$kind]} + $m / $rounds)")
    best[$kind]=$(/usr/bin/python3 -c "print(max(${best[$kind]}, $b))")
  done
done
for kind in nf4 nf4dq; do
  /usr/bin/python3 -c "print('%-6s / bf16: %.2fx of the mean tokens/s, %.2fx of the fastest step' % ('$kind', ${mean[$kind]} / ${mean[bf16]}, ${best[$kind]} / ${best[bf16]}))"
done
# the matmuls that read the frozen weights, at the recipe's gate/up shape
# (rows 4 x 128, dim 512, hidden 1536): single calls alternated over the
# weight's storages in one process (bench/bench_matmul.c, "ntw", "nnw")
LP_NUM_THREADS=${LP_NUM_THREADS:-2} "$build/bench/bench_matmul" 512 1536 512 20 ntw,nnw | grep '^vktrain'
