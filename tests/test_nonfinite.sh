# test_nonfinite: steps whose loss or gradient norm is not finite, and
# labels outside the vocabulary. A tiny llama on SFT samples read in file
# order (shuffle: false), so the samples of each step are known.
#  1. nan_policy stop (the default): a NaN put into one gradient at step 3
#     (VKTRAIN_TEST_NAN) ends the run with status 1 and an error naming the
#     step, that tensor and the last checkpoint (step_2), which holds the
#     same weights as a clean 2-step run, bit for bit; nothing of step 3 is
#     written but its metrics row (grad_norm null, skipped); metrics.jsonl
#     is strict JSON (no bare NaN);
#  2. resuming that run with nan_policy: skip (not part of the recipe hash)
#     and no NaN ends with the weights of an uninterrupted 6-step run;
#  3. nan_policy skip: with the NaN at step 3, 6 steps end with the weights,
#     bit for bit, of a clean 5-step run on the same data without step 3's
#     samples (warmup lr): the skipped step left the weights, AdamW's
#     moments, its step counter and the schedule as they were; step 4 logs
#     step 3's lr;
#  4. an lr of 1e38 makes every step from 2 on non-finite by itself: skip
#     gives up after nan_max_skips in a row, naming the count;
#  5. under mpirun (W = 2) the NaN on rank 1 only is skipped by both ranks
#     (the replicas stay identical, and the run matches the W = 1 skip run);
#     with stop, the error is printed once and the job ends with status 1;
#  6. a label outside [0, vocab_size) (VKTRAIN_TEST_BAD_LABEL) makes the
#     device's count of valid labels differ from the host's: status 1 and
#     an error naming the step, the label and where it is;
#  7. precision: reproducible (its own step: the micro-batches' sums over
#     samples) meets 1 (stop, naming the step and the tensor) and 6 alike.
. "$SRC/tests/script_testing.sh"

$py - "$work" <<'PY'
import json, sys
lines = [json.dumps({"prompt": "question %d: what is %d?" % (i, i * 7), "response": "x" * (1 + (i * 5) % 17)})
         for i in range(24)]
open(sys.argv[1] + "/sft24.jsonl", "w").write("\n".join(lines) + "\n")
# Without the samples of step 3 (batch_size 4: lines 9-12).
open(sys.argv[1] + "/sft20.jsonl", "w").write("\n".join(lines[:8] + lines[12:]) + "\n")
PY
cat > "$work/recipe.yaml" <<YAML
seed: 7
output_dir: $work/unused
model: {arch: llama, dim: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, hidden_dim: 64, max_seq_len: 48}
dataset: {type: sft_jsonl, path: $work/sft24.jsonl, packed: false, shuffle: false}
batch_size: 4
max_steps: 6
optimizer: {lr: 1.0e-2, weight_decay: 0.1}
lr_scheduler: {type: constant, warmup_steps: 5}
clip_grad_norm: 1.0
YAML
run() { "$VKTRAIN" train --config "$work/recipe.yaml" "$@"; }
strict_json='import json,sys
def bad(c): raise ValueError("bare " + c)
rows = [json.loads(l, parse_constant=bad) for l in open(sys.argv[1])]'
tensor=model.layers.1.mlp.down_proj.weight

# 1. stop.
run output_dir="$work/clean2" max_steps=2 > "$work/clean2.log" 2>&1
out=$(VKTRAIN_TEST_NAN=3:0:$tensor run output_dir="$work/stop" save_every_n_steps=2 2>&1); rc=$?
check "stop: status 1, naming the step, the tensor and the last checkpoint" \
  '[ $rc -eq 1 ] && grep -q "error: step 3: .*gradient norm nan (the first gradient with a non-finite norm: $tensor).*nan_policy: stop.*the last checkpoint, $work/stop/checkpoints/step_2, is intact" <<<"$out"' \
  || echo "$out" | tail -3
check "stop: the last checkpoint holds the clean run's step-2 weights" \
  'cmp -s "$work/clean2/model.safetensors" "$work/stop/checkpoints/step_2/model.safetensors"'
check "stop: nothing of step 3 but its metrics row" \
  '[ ! -e "$work/stop/checkpoints/step_3" ] && [ ! -e "$work/stop/model.safetensors" ]'
check "stop: metrics.jsonl is strict JSON, step 3 with grad_norm null and skipped" \
  "$py -c '$strict_json
r = rows[-1]
sys.exit(not (len(rows) == 3 and r[\"step\"] == 3 and r[\"grad_norm\"] is None and r[\"skipped\"] is True))' $work/stop/metrics.jsonl"

# 2. Resume the stopped run with skip: it goes on as if nothing happened.
run output_dir="$work/clean6" > "$work/clean6.log" 2>&1
out=$(run output_dir="$work/stop" save_every_n_steps=2 resume=true nan_policy=skip 2>&1); rc=$?
check "resuming the stopped run with nan_policy: skip ends as an uninterrupted run" \
  '[ $rc -eq 0 ] && cmp -s "$work/clean6/model.safetensors" "$work/stop/model.safetensors"' || echo "$out" | tail -3

# 3. skip.
out=$(VKTRAIN_TEST_NAN=3 run output_dir="$work/skip" nan_policy=skip 2>&1); rc=$?
check "skip: warns naming the step and goes on" \
  '[ $rc -eq 0 ] && grep -q "warning: step 3: .*its update is skipped (nan_policy: skip; 1 in a row, at most 10)" <<<"$out"' \
  || echo "$out" | tail -3
run output_dir="$work/without3" dataset.path="$work/sft20.jsonl" max_steps=5 > "$work/without3.log" 2>&1
check "skip: the weights equal a clean run without step 3's samples, bit for bit" \
  'cmp -s "$work/skip/model.safetensors" "$work/without3/model.safetensors"'
check "skip: step 3 is logged skipped, and step 4 runs at step 3's lr" \
  "$py -c '$strict_json
lr = [r[\"lr\"] for r in rows]
print(\"  lr\", lr)
sys.exit(not (len(rows) == 6 and rows[2].get(\"skipped\") and lr[3] == lr[2] and lr[4] > lr[3]))' $work/skip/metrics.jsonl"

# 4. Non-finite steps in a row.
out=$(run output_dir="$work/huge" optimizer.lr=1e38 clip_grad_norm=null nan_policy=skip nan_max_skips=2 2>&1); rc=$?
check "skip gives up after nan_max_skips in a row" \
  '[ $rc -eq 1 ] && grep -q "error: step 4: .*after 2 steps in a row were skipped (nan_max_skips: 2)" <<<"$out" &&
   [ "$(grep -c "its update is skipped" <<<"$out")" -eq 2 ]' || echo "$out" | tail -3

# 5. Two ranks.
if command -v mpirun > /dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  mpi() { LP_NUM_THREADS=1 timeout 300 mpirun --oversubscribe -np 2 -x LP_NUM_THREADS -x VKTRAIN_TEST_NAN "$@"; }
  out=$(VKTRAIN_TEST_NAN=3:1 mpi "$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/skip2" \
    nan_policy=skip batch_size=2 2>&1); rc=$?
  check "W=2: a NaN on rank 1 is skipped by both ranks; the replicas stay identical" \
    '[ $rc -eq 0 ] && grep -q "replicas: identical on all 2 ranks at step 6$" <<<"$out"' || echo "$out" | tail -5
  check "W=2: the skip run matches the W=1 one" "$py $SRC/tests/compare_runs.py $work/skip $work/skip2 > /dev/null"
  out=$(VKTRAIN_TEST_NAN=3:1 mpi "$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/stop2" \
    batch_size=2 2>&1); rc=$?
  check "W=2: stop prints the error once and ends the job with status 1" \
    '[ $rc -ne 0 ] && [ "$(grep -c "error: step 3" <<<"$out")" -eq 1 ] && ! grep -q MPI_ABORT <<<"$out"' \
    || echo "$out" | tail -5
else
  echo "FAIL: mpirun not found (apt-get install openmpi-bin)"
  fail=1
fi

# 6. A label outside the vocabulary.
out=$(VKTRAIN_TEST_BAD_LABEL=2 run output_dir="$work/label" 2>&1); rc=$?
check "a label outside [0, V) is an error naming the step, the label and where it is" \
  '[ $rc -eq 1 ] && grep -q "error: step 2: micro-batch 0, row 0, position [0-9]* holds label 259, outside \[0, 259) (model.vocab_size).*the device counted [0-9]* valid labels, the host [0-9]*" <<<"$out"' \
  || echo "$out" | tail -3

# 7. The same in precision: reproducible.
out=$(VKTRAIN_TEST_NAN=3:0:$tensor run output_dir="$work/rstop" precision=reproducible 2>&1); rc=$?
check "reproducible: a NaN gradient stops the run naming the step and the tensor" \
  '[ $rc -eq 1 ] && grep -q "error: step 3: .*gradient norm nan (the first gradient with a non-finite norm: $tensor)" <<<"$out"' \
  || echo "$out" | tail -3
out=$(VKTRAIN_TEST_BAD_LABEL=2 run output_dir="$work/rlabel" precision=reproducible 2>&1); rc=$?
check "reproducible: a label outside [0, V) is the same error" \
  '[ $rc -eq 1 ] && grep -q "error: step 2: micro-batch 0, row 0, position [0-9]* holds label 259, outside \[0, 259)" <<<"$out"' \
  || echo "$out" | tail -3
exit $fail
