#!/usr/bin/env bash
# docs/training.md's table of device memory per rank (README shows a few rows), as `vktrain train --dry-run`
# prints it, for a Llama-3.2-1B-shaped and a SmolLM-135M-shaped llama, a
# Qwen3-0.6B-shaped one, a Gemma-3-270M-shaped one and a Llama-3.1-8B-shaped one
# (random weights: the plan depends on the shapes only), each with
#   full fine-tuning; full with dist.zero: 1 on 4 ranks (mpirun -np 4);
#   LoRA (rank 16 on all seven linear layers); LoRA with model.base_dtype: bf16;
#   LoRA with model.base_dtype: nf4, with model.nf4_double_quant too, and
#   the latter with model.activation_checkpointing.
# batch_size and max_seq_len are those printed in the table's heading.
# Prints the Markdown table; nothing is allocated or written but a scratch
# folder.
#
#   scripts/memory_table.sh [batch_size [max_seq_len]]   (defaults: 1, 2048)
# Environment: MEMORY_BUILD (default build; built when it is the default).
set -euo pipefail
cd "$(dirname "$0")/.."
batch=${1:-1}
seq=${2:-2048}
build=${MEMORY_BUILD:-build}
[ "$build" = build ] && scripts/build.sh >/dev/null
vk=$(realpath "$build/vktrain")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "the quick brown fox jumps over the lazy dog" > "$work/corpus.txt"

# name|model keys (flow YAML)
shapes=(
  "Llama-3.2-1B|arch: llama, dim: 2048, n_layers: 16, n_heads: 32, n_kv_heads: 8, hidden_dim: 8192, vocab_size: 128256, tie_embeddings: true, rope_theta: 500000.0"
  "Llama-3.1-8B|arch: llama, dim: 4096, n_layers: 32, n_heads: 32, n_kv_heads: 8, hidden_dim: 14336, vocab_size: 128256, tie_embeddings: false, rope_theta: 500000.0"
  "SmolLM-135M|arch: llama, dim: 576, n_layers: 30, n_heads: 9, n_kv_heads: 3, hidden_dim: 1536, vocab_size: 49152, tie_embeddings: true"
  "Qwen3-0.6B|arch: llama, dim: 1024, n_layers: 28, n_heads: 16, n_kv_heads: 8, head_dim: 128, qk_norm: true, hidden_dim: 3072, vocab_size: 151936, tie_embeddings: true, rope_theta: 1000000.0"
  "Gemma-3-270M|arch: llama, dim: 640, n_layers: 18, n_heads: 4, n_kv_heads: 1, head_dim: 256, qk_norm: true, hidden_dim: 2048, vocab_size: 262144, tie_embeddings: true, rope_theta: 1000000.0, rope_local_base_freq: 10000.0, norm_offset: true, post_norms: true, scale_embeddings: true, mlp_activation: gelu_pytorch_tanh, query_pre_attn_scalar: 256, sliding_window: 512, layer_types: [$(for i in $(seq 1 18); do [ $((i % 6)) = 0 ] && printf full_attention || printf sliding_attention; if [ "$i" -lt 18 ]; then printf ', '; fi; done)]"
)
lora="lora.rank=16 lora.alpha=32 lora.targets=[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj]"
modes=(
  "full fine-tuning|1|"
  "full, dist.zero: 1 on 4 ranks|4|dist.zero=1"
  "LoRA r16, all linear layers|1|$lora"
  "LoRA r16, base_dtype: bf16|1|$lora model.base_dtype=bf16"
  "LoRA r16, base_dtype: nf4|1|$lora model.base_dtype=nf4"
  "LoRA r16, nf4, double quant|1|$lora model.base_dtype=nf4 model.nf4_double_quant=true"
  "LoRA r16, nf4, double quant, checkpointing|1|$lora model.base_dtype=nf4 model.nf4_double_quant=true model.activation_checkpointing=true"
)

# One dry run: the plan's figures as "parameters|gradients|optimizer|activations|workspace|total".
plan() {
  local recipe=$1 np=$2; shift 2
  local cmd=("$vk" train --config "$recipe" --dry-run "$@")
  if [ "$np" -gt 1 ]; then
    cmd=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LP_NUM_THREADS=1
         timeout 600 mpirun --oversubscribe -np "$np" "${cmd[@]}")
  fi
  local out
  # The plan is printed before the check that it fits this machine's memory
  # (a refusal here exits 1), so only a missing plan is a failure.
  out=$("${cmd[@]}" 2>&1) || true
  grep -Eq "^  total " <<<"$out" || { echo "memory_table: ${cmd[*]} printed no plan:" >&2; echo "$out" | tail -5 >&2; exit 1; }
  awk '/^  (parameters|gradients|optimizer state|activations|workspace|total) / {
         sub(/^  /, ""); sub(/optimizer state/, "optimizer"); v[$1] = $2 " " $3 }
       END { printf "%s|%s|%s|%s|%s|%s\n", v["parameters"], v["gradients"], v["optimizer"],
             v["activations"], v["workspace"], v["total"] }' <<<"$out"
}

echo "Device memory per rank from \`vktrain train --dry-run\`, batch_size $batch x max_seq_len $seq (fp32 activations, no activation checkpointing unless said)"
echo
echo "| model | run | parameters | gradients | optimizer state | activations | workspace | total |"
echo "|---|---|---|---|---|---|---|---|"
for shape in "${shapes[@]}"; do
  name=${shape%%|*}
  recipe="$work/$name.yaml"
  cat > "$recipe" <<YAML
output_dir: $work/out
model: {${shape#*|}, max_seq_len: $seq}
dataset: {type: text, path: $work/corpus.txt}
batch_size: $batch
YAML
  for mode in "${modes[@]}"; do
    IFS='|' read -r label np keys <<<"$mode"
    # the 8B shape's full fine-tuning on 4 ranks exceeds a small host, and a
    # rank's refusal can end the job before rank 0 prints its plan
    [ "$name" = Llama-3.1-8B ] && [ "$np" -gt 1 ] && continue
    # shellcheck disable=SC2086 # keys are separate key=value words
    IFS='|' read -r p gr o a w t <<<"$(plan "$recipe" "$np" $keys)"
    echo "| $name | $label | $p | $gr | $o | $a | $w | $t |"
  done
done
