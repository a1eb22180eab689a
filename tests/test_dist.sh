# test_dist: data parallel under mpirun (OpenMPI), on lavapipe with one
# thread per rank.
#  1. for llama and gpt2, (W,A,B) = (1,1,8), (2,2,2), (2,4,1), (4,1,2),
#     (1,4,2) give the same losses (rel < 1e-5), grad norms (rel < 1e-4)
#     and final weights (max|Δ| ≤ 1e-4 of the model's largest weight; see
#     compare_runs.py) — float32 rounding only: the summation order
#     differs with W;
#     with dist.bucket_mb=1 the llama gradients span several buckets;
#  1b. the same for SFT samples of unequal length, unpacked (padding per
#     micro-batch, prompts masked), read in file order: every step gives
#     the ranks unequal numbers of valid labels (checked from the file, not
#     from vktrain), so averaging per rank or per micro-batch would show;
#  1c. one model with the newer families' ops (Gemma 2/3, Qwen3: q/k
#     norms, head_dim apart, (1 + w) and post norms, GeGLU, scaled
#     embeddings, per-layer windows and RoPE bases, soft-capping): four
#     splits, with ZeRO-1 and activation checkpointing among them, a resume
#     on another split and LoRA under two splits give one trajectory; a
#     control without the caps has another loss;
#  2. a simulated mixed cluster (rank 1: tiled kernels and fused AdamW
#     arithmetic) drifts, the replica check reports and repairs it, and the
#     run ends with identical replicas;
#  3. a checkpoint written by 2 ranks resumes on 1 rank (A doubled) and
#     continues the same trajectory;
#  4. a rank killed by SIGKILL mid-run, a config error and a missing data
#     file each end the whole job within 90 s with a non-zero status.
. "$SRC/tests/dist_testing.sh"
recipe llama ", n_layers: 3, n_kv_heads: 2" > "$work/llama.yaml" # 1.2 MB of gradients: 2 buckets
recipe gpt2 ", n_layers: 2" > "$work/gpt2.yaml"

# 1. Factorizations.
for arch in llama gpt2; do
  dirs=()
  for wab in "1 1 8" "2 2 2" "2 4 1" "4 1 2" "1 4 2"; do
    set -- $wab
    out="$work/$arch-$1-$2-$3"
    mpi "$1" "$VKTRAIN" train --config "$work/$arch.yaml" output_dir="$out" gradient_accumulation_steps=$2 \
      batch_size=$3 > "$out.log" 2>&1 || { echo "run $arch W=$1 A=$2 B=$3 failed:"; tail -5 "$out.log"; fail=1; }
    dirs+=("$out")
  done
  check "$arch: (W,A,B) = (1,1,8) (2,2,2) (2,4,1) (4,1,2) (1,4,2) give one trajectory" "$cmp_py ${dirs[*]}"
done
# 1b. Unequal valid-token counts per rank (W = 2 and 4, A = 1 and 2).
$py - "$work/sft.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(48):
        f.write(json.dumps({"prompt": "q%d: %s?" % (i, "ab" * (i % 5)), "response": "r" * (1 + (i * 7) % 19)}) + "\n")
PY
dirs=()
for wab in "1 1 8" "2 2 2" "4 1 2"; do
  set -- $wab
  out="$work/sft-$1-$2-$3"
  mpi "$1" "$VKTRAIN" train --config "$work/llama.yaml" output_dir="$out" gradient_accumulation_steps=$2 \
    batch_size=$3 dataset.type=sft_jsonl dataset.path="$work/sft.jsonl" dataset.packed=false dataset.shuffle=false \
    > "$out.log" 2>&1 || { echo "run sft W=$1 A=$2 B=$3 failed:"; tail -5 "$out.log"; fail=1; }
  dirs+=("$out")
done
check "SFT data: the ranks' valid-label counts differ in every step of (2,2,2) and (4,1,2)" "$py - $work/sft.jsonl $work/sft-1-1-8/metrics.jsonl <<'PY'
import json, sys
T = 32
def valid(s):  # labels of BOS + prompt + response + EOS cut to T + 1 tokens: the response and EOS
    flags = [0] * (1 + len(s['prompt'])) + [1] * (len(s['response']) + 1)
    return sum(flags[1:T + 1])
n = [valid(json.loads(l)) for l in open(sys.argv[1])]
ok = True
for W, A, B in ((2, 2, 2), (4, 1, 2)):
    G = W * A * B
    for step in range(5):
        per_rank = [sum(n[step * G + k] for k in range(G) if (k // B) % W == r) for r in range(W)]
        print('  W=%d A=%d B=%d step %d: valid labels per rank %s' % (W, A, B, step + 1, per_rank))
        ok &= len(set(per_rank)) == W
tokens = [json.loads(l)['tokens'] for l in open(sys.argv[2])]
print('  valid labels per step: from the file', [sum(n[s * 8:s * 8 + 8]) for s in range(5)], 'vktrain', tokens)
sys.exit(not (ok and tokens == [sum(n[s * 8:s * 8 + 8]) for s in range(5)]))
PY"
check "SFT, unequal counts per rank: (W,A,B) = (1,1,8) (2,2,2) (4,1,2) give one trajectory" "$cmp_py ${dirs[*]}"

# 1c. The newer families' ops (Gemma 2/3, Qwen3) keep the invariance: one
# model with all of them (head_dim apart from dim/heads, q/k norms, (1 + w)
# norms, post norms, GeGLU, scaled embeddings, query_pre_attn_scalar, a
# window on two of three layers with their own RoPE base, soft-capped
# attention scores and final logits) under four splits, one with ZeRO-1 and
# one with activation checkpointing, a resume on another split, and LoRA
# over it under two splits.
recipe llama ", n_layers: 3, n_kv_heads: 2, head_dim: 32, qk_norm: true, norm_offset: true, scale_embeddings: true,
  mlp_activation: gelu_pytorch_tanh, post_norms: true, query_pre_attn_scalar: 16, sliding_window: 5,
  layer_types: [sliding_attention, full_attention, sliding_attention], rope_theta: 1000000, rope_local_base_freq: 10000,
  attn_logit_softcapping: 0.5, final_logit_softcapping: 0.5" > "$work/gemma.yaml"
fam() { # name np A B [key=value ...]
  local name=$1 np=$2 a=$3 b=$4; shift 4
  mpi "$np" "$VKTRAIN" train --config "$work/gemma.yaml" output_dir="$work/$name" gradient_accumulation_steps="$a" \
    batch_size="$b" "$@" > "$work/$name.log" 2>&1 || [ -n "${VKTRAIN_KILL_AFTER_STEP:-}" ] ||
    { echo "run $name (-np $np A=$a B=$b $*) failed:"; tail -5 "$work/$name.log"; fail=1; }
}
fam gemma-118 1 1 8
fam gemma-222 2 2 2
fam gemma-412z 4 1 2 dist.zero=1
fam gemma-142c 1 4 2 model.activation_checkpointing=true
check "the families' ops: (1,1,8) (2,2,2) (4,1,2) with ZeRO-1, (1,4,2) with activation checkpointing give one trajectory" \
  "$cmp_py $work/gemma-118 $work/gemma-222 $work/gemma-412z $work/gemma-142c"
fam gemma-uncapped 1 1 8 max_steps=1 model.attn_logit_softcapping=0 model.final_logit_softcapping=0
check "a control: the same model without the caps has another step-1 loss (the caps act)" "$py - $work/gemma-118 $work/gemma-uncapped <<'PY'
import json, sys
a, b = (json.loads(open(d + '/metrics.jsonl').readline())['loss'] for d in sys.argv[1:])
print('  step-1 loss: capped %.7g, uncapped %.7g' % (a, b))
sys.exit(not abs(a - b) > 1e-3 * abs(b))  # 100x the splits' loss tolerance
PY"
VKTRAIN_KILL_AFTER_STEP=3 fam gemma-killed 2 2 2 save_every_n_steps=2
check "the 2-rank families' run was killed after its step-2 checkpoint" \
  '[ -d "$work/gemma-killed/checkpoints/step_2" ] && [ ! -e "$work/gemma-killed/model.safetensors" ]'
fam gemma-killed 1 2 4 save_every_n_steps=2 resume=true
check "the families' run resumed on 1 rank (A=2, B=4) continues the trajectory" "$cmp_py $work/gemma-118 $work/gemma-killed"
fam gemma-lora-118 1 1 8 lora.rank=4 "lora.targets=[q_proj, v_proj, down_proj]"
fam gemma-lora-222 2 2 2 lora.rank=4 "lora.targets=[q_proj, v_proj, down_proj]"
check "LoRA over the families' ops: (1,1,8) and (2,2,2) give one trajectory" "$cmp_py $work/gemma-lora-118 $work/gemma-lora-222"

check "rank 0 prints the rank -> host -> device map" 'grep -q "rank 3: .*device" "$work/llama-4-1-2.log"'
check "only rank 0 logs steps" '[ "$(grep -c "^step 5/5" "$work/llama-2-2-2.log")" -eq 1 ]'
check "the llama gradients span several buckets" 'grep -q "[2-9] bucket(s)" "$work/llama-2-2-2.log"'

# 2. Mixed cluster.
mpi 1 "$VKTRAIN" train --config "$work/llama.yaml" output_dir="$work/mixed" batch_size=4 dist.check_every=2 : \
  -np 1 -x VKTRAIN_KERNELS=tiled -x VKTRAIN_ADAMW=fused "$VKTRAIN" train --config "$work/llama.yaml" \
  output_dir="$work/mixed" batch_size=4 dist.check_every=2 > "$work/mixed.log" 2>&1
rc=$?
check "the mixed cluster run completes" '[ $rc -eq 0 ]'
check "the drift is reported with ranks, tensors and the difference" 'grep -q "rank 1 differs from rank 0 in .* tensors (largest: .*max |diff|" "$work/mixed.log"'
check "it ends with identical replicas" 'grep -q "replicas: identical on all 2 ranks at step 5" "$work/mixed.log"'
check "rank 1 ran the tiled kernels" 'grep -q "rank 1: .*(tiled kernels)" "$work/mixed.log"'

# 3. Resume a 2-rank checkpoint on 1 rank.
mpi 2 "$VKTRAIN" train --config "$work/llama.yaml" output_dir="$work/w2" batch_size=4 max_steps=8 \
  save_every_n_steps=4 > "$work/w2.log" 2>&1
VKTRAIN_KILL_AFTER_STEP=6 mpi 2 -x VKTRAIN_KILL_AFTER_STEP "$VKTRAIN" train --config "$work/llama.yaml" \
  output_dir="$work/w2k" batch_size=4 max_steps=8 save_every_n_steps=4 > "$work/w2k.log" 2>&1
check "the 2-rank run was killed after its step-4 checkpoint" '[ -d "$work/w2k/checkpoints/step_4" ] && [ ! -e "$work/w2k/model.safetensors" ]'
"$VKTRAIN" train --config "$work/llama.yaml" output_dir="$work/w2k" batch_size=4 gradient_accumulation_steps=2 \
  max_steps=8 save_every_n_steps=4 resume=true > "$work/w1r.log" 2>&1
check "the 1-rank resume continues the 2-rank trajectory" "$cmp_py $work/w2 $work/w2k"

# 4. Failures end the job.
timed() { local t0=$SECONDS; "$@" > "$work/fail.log" 2>&1; rc=$?; took=$((SECONDS - t0)); }
timed env VKTRAIN_KILL_AFTER_STEP=3 VKTRAIN_KILL_RANK=1 timeout 120 mpirun --oversubscribe -np 2 \
  -x VKTRAIN_KILL_AFTER_STEP -x VKTRAIN_KILL_RANK "$VKTRAIN" train --config "$work/llama.yaml" \
  output_dir="$work/dead" max_steps=100000
check "a SIGKILLed rank ends the job within 90 s (took ${took}s, status $rc)" '[ $rc -ne 0 ] && [ $took -lt 90 ]'
printf 'output_dir: %s\nmodel:\n  dim: 64\n  n_layrs: 2\n' "$work/x" > "$work/bad.yaml"
timed timeout 120 mpirun --oversubscribe -np 2 "$VKTRAIN" train --config "$work/bad.yaml"
check "a config error ends every rank within 90 s, naming the key" '[ $rc -ne 0 ] && [ $took -lt 90 ] && grep -q "n_layrs" "$work/fail.log"'
timed timeout 120 mpirun --oversubscribe -np 2 "$VKTRAIN" train --config "$work/llama.yaml" \
  dataset.path="$work/missing.txt" output_dir="$work/y"
check "a missing data file ends the job within 90 s, naming it" '[ $rc -ne 0 ] && [ $took -lt 90 ] && grep -q "missing.txt" "$work/fail.log"'
exit $fail
