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
