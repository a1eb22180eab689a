# test_repro_train: precision: reproducible trains to the same bits under
# every split of the global batch, on lavapipe
# with one thread per rank:
#  1. for a tiny llama and a tiny gpt2 (packed documents: rows hold several
#     documents, so attention sees doc segments), (W,A,B) = (1,1,8),
#     (2,2,2), (2,4,1), (4,1,2), (1,4,2) write byte-identical
#     model.safetensors (cmp) and the same loss, grad_norm, val_loss, lr
#     and tokens in every metrics row (the printed numbers compared as
#     text, timing fields left out);
#     the same for A = 3 (padded to 4) and for unpacked SFT samples of
#     unequal length;
#     a llama with a sliding window: three splits and the tiled kernels;
#     per layer (a window on one layer, no RoPE on the other): two splits;
#  2. a run killed after step 3 of 4 under (2,2,2) and resumed from its
#     step-2 checkpoint under (1,4,2) gives the same bytes and rows;
#  3. negative controls: the same llama in precision: fp32 under (1,1,8)
#     and (2,2,2), and from the texel and the tiled kernels, does not give
#     the same bytes (the sums round differently), so the comparisons above
#     can fail;
#  4. the recipe refusals of the mode, each naming its key, and a world
#     size that is not a power of two refused at start-up.
#  5. the same bytes and metrics at (1,1,8) from the tiled (GPU) kernel
#     family, under lavapipe's vector widths 128, 256 and 512 (subgroup
#     sizes 4, 8, 16), without AVX / FMA and on a second lavapipe, a
#     newer Mesa (scripts/lavapipe2.sh; variants() below); and from two
#     ranks of which one runs the texel kernels, the other the tiled ones,
#     and from two ranks on the two drivers (mixed clusters).
. "$SRC/tests/dist_testing.sh"

# The second lavapipe's VAR=value words (the test fails without it), with
# the validation layer off there: Debian 12's layer (1.3.239) predates
# that driver's Vulkan 1.4 and warns about every texel view's type in our
# SPIR-V 1.5, where it is valid, which it does not on Mesa 22.3 (and
# VK_LAYER_DISABLES of its shader checks did not silence it).
lp2=$("$SRC/scripts/lavapipe2.sh" env) || { echo "FAIL: the second lavapipe is missing"; fail=1; lp2=""; }
[ -z "$lp2" ] || lp2="$lp2 VKTRAIN_VALIDATE=0"
driver() { env "$@" "$VKTRAIN" devices | sed -n 's/^ *driver *//p' | head -1; }
if [ -n "$lp2" ]; then
  echo "drivers: $(driver) and $(driver $lp2)"
  check "the second lavapipe is another driver than the system's" '[ "$(driver)" != "$(driver $lp2)" ]'
fi

# Documents of 1 to 4 lines separated by "%" lines: packed rows of 32
# tokens hold pieces of several documents.
for i in $(seq 1 240); do
  for l in $(seq 0 $((i % 4))); do
    echo "doc $i line $l: the $((i % 7)) quick brown foxes jump over $(((i + l) * 13 % 11)) lazy dogs"
  done
  echo "%"
done > "$work/docs.txt"
repro_recipe() { # arch extra-model-keys
  cat <<YAML
seed: 5
output_dir: $work/unused
model: {arch: $1, dim: 32, n_heads: 2, hidden_dim: 64, n_layers: 2, max_seq_len: 32 $2}
dataset: {type: text, path: $work/docs.txt, separator: "%", packed: true, val_fraction: 0.05}
batch_size: 8
max_steps: 4
optimizer: {lr: 3.0e-3, weight_decay: 0.1}
lr_scheduler: {type: cosine, warmup_steps: 2}
clip_grad_norm: 0.5
log_every_n_steps: 1
eval_every_n_steps: 2
save_every_n_steps: 2
precision: reproducible
YAML
}
repro_recipe llama ", n_kv_heads: 1" > "$work/llama.yaml"
repro_recipe gpt2 "" > "$work/gpt2.yaml"

# The metrics rows without the timing fields, one line per row.
rows() { $py -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print({k: v for k, v in r.items() if k not in ("tokens_per_sec", "step_ms")})' "$1/metrics.jsonl"; }
# same DIR... : every model.safetensors equal to the first's, byte for
# byte, and every metrics file's rows equal to the first's.
same() {
  local ref=$1 ok=0; shift
  for d in "$@"; do
    if ! cmp "$ref/model.safetensors" "$d/model.safetensors"; then ok=1; fi
    if [ "$(rows "$ref")" != "$(rows "$d")" ]; then
      echo "metrics differ: $ref vs $d"; diff <(rows "$ref") <(rows "$d"); ok=1
    fi
  done
  return $ok
}
# The configurations that must give the same bytes as the plain run (the
# device's own kernel family, lavapipe's default vector width and CPU
# features): the GPU kernel family (tiled) for the whole run, lavapipe's vector
# widths 128, 256 and 512 (subgroup sizes 4, 8, 16), and no AVX / FMA.
# One line per variant: a name, then its VAR=value words. The plain run
# takes the five splits; each variant runs (1,1,8) and is compared with
# the plain (1,1,8).
variants() {
  echo "tiled VKTRAIN_KERNELS=tiled"
  echo "w128 LP_NATIVE_VECTOR_WIDTH=128"
  echo "w256 LP_NATIVE_VECTOR_WIDTH=256"
  echo "w512 LP_NATIVE_VECTOR_WIDTH=512"
  echo "sse41 GALLIUM_OVERRIDE_CPU_CAPS=sse4.1"
  [ -z "$lp2" ] || echo "lavapipe2 $lp2"
}
variant=plain variant_env=""

# train NAME W A B [KEY=VALUE...]: one run into $work/NAME (recipe: the
# name's first word), under $variant_env.
train() {
  local name=$1 w=$2 a=$3 b=$4; shift 4
  local xs=() kv
  for kv in $variant_env; do xs+=(-x "${kv%%=*}"); done
  ( [ -z "$variant_env" ] || export $variant_env
    mpi "$w" "${xs[@]}" "$VKTRAIN" train --config "$work/${name%%-*}.yaml" output_dir="$work/$name" \
      gradient_accumulation_steps="$a" batch_size="$b" "$@" > "$work/$name.log" 2>&1 ) ||
    { echo "run $name (W=$w A=$a B=$b $* $variant_env) failed:"; tail -5 "$work/$name.log"; fail=1; }
}

# 1. Every split, both archs; every variant at (1,1,8).
for arch in llama gpt2; do
  dirs=()
  for wab in "1 1 8" "2 2 2" "2 4 1" "4 1 2" "1 4 2"; do
    set -- $wab
    train "$arch-plain-$1$2$3" "$1" "$2" "$3"
    dirs+=("$work/$arch-plain-$1$2$3")
  done
  check "$arch: (W,A,B) = (1,1,8) (2,2,2) (2,4,1) (4,1,2) (1,4,2) give the same model.safetensors bytes and metrics" \
    "same ${dirs[*]}"
  while read -r variant variant_env <&3; do # fd 3: mpirun reads stdin
    train "$arch-$variant-118" 1 1 8
    desc=$variant_env
    [ "$variant" != lavapipe2 ] || desc="the second lavapipe, $(driver $lp2),"
    check "$arch: $desc gives the same bytes and metrics as the plain run" \
      "same $work/$arch-plain-118 $work/$arch-$variant-118"
  done 3< <(variants)
done
# Sliding windows (model.sliding_window: 5 of the 32 positions, with the
# packed documents): the same bytes under three splits and from the tiled
# kernels; a control: not the bytes of the run without the window.
for wab in "1 1 8" "2 2 2" "1 4 2"; do
  set -- $wab
  train "llama-window-$1$2$3" "$1" "$2" "$3" model.sliding_window=5
done
variant_env=VKTRAIN_KERNELS=tiled
train "llama-windowtiled-118" 1 1 8 model.sliding_window=5
variant_env=""
check "llama with a sliding window of 5: (1,1,8) (2,2,2) (1,4,2) and the tiled kernels give the same bytes and metrics" \
  "same $work/llama-window-118 $work/llama-window-222 $work/llama-window-142 $work/llama-windowtiled-118"
check "control: the window changes the trained model" \
  '! cmp -s "$work/llama-window-118/model.safetensors" "$work/llama-plain-118/model.safetensors"'
# Per layer (Qwen2's max_window_layers, SmolLM3's no_rope_layers): layer 0
# global without RoPE, layer 1 windowed; two splits, and not the bytes of
# the window on both layers.
perlayer=(model.sliding_window=5 "model.layer_types=[full_attention, sliding_attention]" "model.no_rope_layers=[0, 1]")
train "llama-perlayer-118" 1 1 8 "${perlayer[@]}"
train "llama-perlayer-222" 2 2 2 "${perlayer[@]}"
check "llama with a window on layer 1 and no RoPE on layer 0: (1,1,8) and (2,2,2) give the same bytes and metrics" \
  "same $work/llama-perlayer-118 $work/llama-perlayer-222"
check "control: the per-layer settings change the trained model" \
  '! cmp -s "$work/llama-perlayer-118/model.safetensors" "$work/llama-window-118/model.safetensors"'
# A mixed cluster: rank 0 on the texel kernels, rank 1 on the tiled ones
# (another vendor's kernels on the same data), (2,2,2) as above.
LP_NUM_THREADS=1 timeout 300 mpirun --oversubscribe -np 1 -x LP_NUM_THREADS "$VKTRAIN" train --config "$work/llama.yaml" \
  output_dir="$work/llama-mixed" gradient_accumulation_steps=2 batch_size=2 : \
  -np 1 -x LP_NUM_THREADS -x VKTRAIN_KERNELS=tiled "$VKTRAIN" train --config "$work/llama.yaml" \
  output_dir="$work/llama-mixed" gradient_accumulation_steps=2 batch_size=2 > "$work/llama-mixed.log" 2>&1 ||
  { echo "the mixed run failed:"; tail -5 "$work/llama-mixed.log"; fail=1; }
grep "rank [01]:" "$work/llama-mixed.log"
check "ranks on different kernel families give the same bytes and metrics, with no replica repair" \
  'same "$work/llama-plain-118" "$work/llama-mixed" && grep -q "rank 1: .*(tiled kernels)" "$work/llama-mixed.log" &&
   grep -q "rank 0: .*(texel kernels)" "$work/llama-mixed.log" && grep -q "replicas: identical on all 2 ranks at step 4$" "$work/llama-mixed.log"'
# Two drivers in one job: rank 1 on the second lavapipe.
if [ -n "$lp2" ]; then
  xs=()
  for kv in $lp2; do xs+=(-x "$kv"); done
  LP_NUM_THREADS=1 timeout 300 mpirun --oversubscribe -np 1 -x LP_NUM_THREADS "$VKTRAIN" train \
    --config "$work/llama.yaml" output_dir="$work/llama-2drivers" gradient_accumulation_steps=2 batch_size=2 : \
    -np 1 -x LP_NUM_THREADS "${xs[@]}" "$VKTRAIN" train --config "$work/llama.yaml" \
    output_dir="$work/llama-2drivers" gradient_accumulation_steps=2 batch_size=2 > "$work/llama-2drivers.log" 2>&1 ||
    { echo "the two-driver run failed:"; tail -5 "$work/llama-2drivers.log"; fail=1; }
  check "ranks on two Mesa releases give the same bytes and metrics, with no replica repair" \
    'same "$work/llama-plain-118" "$work/llama-2drivers" &&
     grep -q "replicas: identical on all 2 ranks at step 4$" "$work/llama-2drivers.log"'
fi
variant=plain variant_env=""
check "the runs log 4 steps with val_loss at steps 2 and 4" \
  '[ "$(grep -c val_loss "$work/llama-plain-118/metrics.jsonl")" -eq 2 ] && [ "$(wc -l < "$work/llama-plain-118/metrics.jsonl")" -eq 4 ]'
check "the (2,2,2) replicas needed no repair" 'grep -q "replicas: identical on all 2 ranks at step 4$" "$work/llama-plain-222.log"'
check "the dry run shows the gradient stack" \
  '"$VKTRAIN" train --config "$work/llama.yaml" output_dir="$work/dry" --dry-run 2>&1 | grep -q "log2(batch_size) floats per element"'

# 1b. A = 3 (the tree over micro-batches padded with +0 subtrees to 4), and
# unpacked SFT samples of unequal length (each padded to its micro-batch's
# longest, which depends on the split: padding rows must add nothing to any
# sum): 2 steps.
train llama-pad-132 1 3 2 max_steps=2
train llama-pad-231 2 3 1 max_steps=2
check "A = 3: (W,A,B) = (1,3,2) (2,3,1) give the same bytes and metrics" "same $work/llama-pad-132 $work/llama-pad-231"
$py - "$work/sft.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(48):
        f.write(json.dumps({"prompt": "q%d: %s?" % (i, "ab" * (i % 5)), "response": "r" * (1 + (i * 7) % 19)}) + "\n")
PY
sft="dataset.type=sft_jsonl dataset.path=$work/sft.jsonl dataset.separator=null dataset.packed=false max_steps=2"
train llama-sft-118 1 1 8 $sft
train llama-sft-412 4 1 2 $sft
check "unpacked SFT: (W,A,B) = (1,1,8) (4,1,2) give the same bytes and metrics" "same $work/llama-sft-118 $work/llama-sft-412"

# 2. Killed after step 3 under (2,2,2), resumed under (1,4,2).
VKTRAIN_KILL_AFTER_STEP=3 mpi 2 -x VKTRAIN_KILL_AFTER_STEP "$VKTRAIN" train --config "$work/llama.yaml" \
  output_dir="$work/llama-resumed" gradient_accumulation_steps=2 batch_size=2 > "$work/killed.log" 2>&1
check "the killed run stopped after its step-2 checkpoint" \
  '[ -d "$work/llama-resumed/checkpoints/step_2" ] && [ ! -e "$work/llama-resumed/model.safetensors" ]'
train llama-resumed 1 4 2 resume=true
check "the resumed run gives the same bytes and metrics" "same $work/llama-plain-118 $work/llama-resumed"

# 3. Negative control: precision: fp32 at two splits.
train llama-fp32a 1 1 8 precision=fp32
train llama-fp32b 2 2 2 precision=fp32
if cmp -s "$work/llama-fp32a/model.safetensors" "$work/llama-fp32b/model.safetensors"; then
  echo "note: precision: fp32 gave the same bytes under (1,1,8) and (2,2,2) this time"
  fail=1
else
  echo "ok: precision: fp32 gives different bytes under (1,1,8) and (2,2,2) (the control)"
fi
variant_env="VKTRAIN_KERNELS=tiled" train llama-fp32c 1 1 8 precision=fp32
if cmp -s "$work/llama-fp32a/model.safetensors" "$work/llama-fp32c/model.safetensors"; then
  echo "note: precision: fp32 gave the same bytes from the texel and tiled kernels this time"
  fail=1
else
  echo "ok: precision: fp32 gives different bytes from the texel and tiled kernels (the control)"
fi

# 4. What the mode refuses.
refused() { # key override...: the run fails naming the key
  local key=$1; shift
  "$VKTRAIN" train --config "$work/llama.yaml" output_dir="$work/refused" "$@" > "$work/refused.log" 2>&1
  [ $? -ne 0 ] && grep -q "$key" "$work/refused.log" && grep -q "reproducible" "$work/refused.log"
}
check "batch_size 6 is refused" 'refused batch_size batch_size=6'
check "dist.zero is refused" 'refused dist.zero dist.zero=1'
check "LoRA is refused" 'refused lora lora.rank=4'
check "model.base_dtype bf16 is refused" 'refused model.base_dtype lora.rank=4 model.base_dtype=bf16'
check "Qwen3's q/k norms are refused, naming the op" 'refused "model.qk_norm: a model with per-head q/k norms" model.qk_norm=true'
check "the Gemma family's GeGLU is refused, naming the op" \
  'refused "model.mlp_activation: the Gemma family.s GeGLU" model.mlp_activation=gelu_pytorch_tanh model.norm_offset=true model.scale_embeddings=true'
mpi 3 "$VKTRAIN" train --config "$work/llama.yaml" output_dir="$work/w3" > "$work/w3.log" 2>&1
rc=$?
check "3 ranks are refused at start-up, naming the world size" \
  '[ $rc -ne 0 ] && grep -q "power of two" "$work/w3.log" && [ ! -e "$work/w3/metrics.jsonl" ]'
exit $fail
