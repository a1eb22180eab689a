# test_run_errors: what a run says when its data, its output_dir or its
# resume do not fit, each case with its status and message:
#  1. a run ends naming where the model, the checkpoint and the metrics
#     are; output_dir and the checkpoint hold the resolved recipe
#     (recipe.yaml, itself a recipe that resolves to the same);
#  2. resume: another recipe is refused naming each differing key with both
#     values; max_steps below the checkpoint's step is refused naming both;
#     equal to it, nothing is trained and that is said; larger, the
#     learning-rate schedule re-stretches and a warning gives both lrs;
#  3. an SFT set whose labels are all masked is refused at load, suggesting
#     dataset.train_on_input: true; an empty validation file is refused at
#     start; neither leaves an output_dir behind (nor its parents);
#  4. an output_dir that cannot be made, resume with overwrite, and bad
#     nan_policy / nan_max_skips values are refused before anything runs;
#  5. a metrics.jsonl that cannot be written (a full disk: /dev/full) ends
#     the run naming the file and the reason;
#  6. under mpirun, a recipe error and a data error are printed once (by
#     one rank) and the job ends with status 1 without MPI_Abort.
. "$SRC/tests/script_testing.sh"

for i in $(seq 1 300); do
  echo "the $((i % 7)) quick brown foxes jump over $((i * 13 % 11)) lazy dogs near river $((i % 5))"
done > "$work/corpus.txt"
cat > "$work/recipe.yaml" <<YAML
seed: 7
output_dir: $work/unused
model: {arch: llama, dim: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, hidden_dim: 64, max_seq_len: 32}
dataset: {type: text, path: $work/corpus.txt, packed: true}
batch_size: 8
max_steps: 4
optimizer: {lr: 3.0e-3}
lr_scheduler: {type: cosine, warmup_steps: 1}
YAML
run() { "$VKTRAIN" train --config "$work/recipe.yaml" "$@" 2>&1; }

# 1. Where the outputs are.
out=$(run output_dir="$work/a"); rc=$?
check "the run ends naming where the model, checkpoint and metrics are" \
  '[ $rc -eq 0 ] && grep -q "^saved: the model in $work/a (model.safetensors, config.json), the checkpoint $work/a/checkpoints/step_4, the metrics $work/a/metrics.jsonl$" <<<"$out"' \
  || echo "$out" | tail -3
printed=$(run output_dir="$work/a" --print-config)
check "recipe.yaml in output_dir and the checkpoint is the resolved recipe" \
  '[ "$(cat "$work/a/recipe.yaml")" = "$printed" ] && cmp -s "$work/a/recipe.yaml" "$work/a/checkpoints/step_4/recipe.yaml" &&
   [ "$("$VKTRAIN" train --config "$work/a/recipe.yaml" --print-config)" = "$printed" ]'

# 2. Resume.
out=$(run output_dir="$work/a" resume=true seed=8 optimizer.lr=1e-2); rc=$?
check "resume with another recipe names each differing key, with both values" \
  '[ $rc -eq 1 ] && grep -q "different recipe (hash [0-9a-f]*, this recipe [0-9a-f]*): 2 keys differ (checkpoint -> this run): seed: 7 -> 8; optimizer.lr: 0.003 -> 0.01. Resume with the checkpoint.s recipe ($work/a/checkpoints/step_4/recipe.yaml)" <<<"$out"' \
  || echo "$out" | tail -3
out=$(run output_dir="$work/a" resume=true max_steps=3); rc=$?
check "resume with max_steps below the checkpoint's step is refused, naming both" \
  '[ $rc -eq 1 ] && grep -q "checkpoints/step_4, is at step 4, past this run.s 3 steps" <<<"$out"' || echo "$out" | tail -3
out=$(run output_dir="$work/a" resume=true); rc=$?
check "resume of a finished run says there is nothing to train" \
  '[ $rc -eq 0 ] && grep -q "nothing is left to train" <<<"$out" && ! grep -q "^step " <<<"$out"' || echo "$out" | tail -3
out=$(run output_dir="$work/a" resume=true max_steps=8); rc=$?
check "resume with a larger max_steps warns that the schedule re-stretches, giving both lrs" \
  '[ $rc -eq 0 ] && grep -q "warning: resume: this run has 8 steps, the checkpoint.s run had 4: the learning-rate schedule now spans 8 steps, so step 5 runs at lr 0.00[0-9]* where the earlier one would give 0$" <<<"$out" &&
   grep -q "^step 8/8" <<<"$out"' || echo "$out" | tail -3

# 3. Data that cannot train or evaluate; nothing left behind.
for i in $(seq 1 8); do
  echo "{\"prompt\": \"a prompt much longer than the context window of this tiny model $i\", \"response\": \"ok\"}"
done > "$work/masked.jsonl"
out=$(run output_dir="$work/b/c" dataset.type=sft_jsonl dataset.path="$work/masked.jsonl" dataset.packed=false); rc=$?
check "an all-masked SFT set is refused at load, suggesting train_on_input" \
  '[ $rc -eq 1 ] && grep -q "masked.jsonl: every label of its 8 samples is masked.*set dataset.train_on_input: true" <<<"$out"' \
  || echo "$out" | tail -3
check "... and leaves no output_dir" '[ ! -e "$work/b" ]'
: > "$work/empty.txt"
out=$(run output_dir="$work/b/c" dataset.val_path="$work/empty.txt" eval_every_n_steps=2); rc=$?
check "an empty validation file is refused at start" \
  '[ $rc -eq 1 ] && grep -q "dataset.val_path: $work/empty.txt holds no label to evaluate (it has no sequence)" <<<"$out" && [ ! -e "$work/b" ]' \
  || echo "$out" | tail -3

# 4. Refused before anything runs.
: > "$work/file"
out=$(run output_dir="$work/file/out"); rc=$?
check "an output_dir that cannot be made is refused at start" \
  '[ $rc -eq 1 ] && grep -q "output_dir .$work/file/out. cannot be made: $work/file is not a directory" <<<"$out" && ! grep -q "^memory plan" <<<"$out"' \
  || echo "$out" | tail -3
out=$(run output_dir="$work/a" resume=true overwrite=true); rc=$?
check "resume and overwrite together are a recipe error" \
  '[ $rc -eq 1 ] && grep -q "overwrite=true.: resume and overwrite: .*set only one" <<<"$out"' || echo "$out" | tail -3

out=$(run --print-config nan_policy=ignore); rc=$?
check "a bad nan_policy names the choices" \
  '[ $rc -eq 1 ] && grep -q "nan_policy: expected one of stop, skip, got .ignore." <<<"$out"' || echo "$out" | tail -3
out=$(run --print-config nan_max_skips=0); rc=$?
check "nan_max_skips must be at least 1" '[ $rc -eq 1 ] && grep -q "nan_max_skips: 0 is out of range (must be >= 1)" <<<"$out"'

# 5. A full disk.
mkdir -p "$work/full" && ln -s /dev/full "$work/full/metrics.jsonl"
out=$(run output_dir="$work/full" resume=true); rc=$?
check "an unwritable metrics.jsonl ends the run naming it and why" \
  '[ $rc -eq 1 ] && grep -q "error: cannot write $work/full/metrics.jsonl: No space left on device" <<<"$out"' \
  || echo "$out" | tail -3

# 6. mpirun.
if command -v mpirun > /dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  mpi() { LP_NUM_THREADS=1 timeout 120 mpirun --oversubscribe -np 2 -x LP_NUM_THREADS "$VKTRAIN" train "$@" 2>&1; }
  out=$(mpi --config "$work/recipe.yaml" output_dir="$work/m" model.n_layrs=2); rc=$?
  check "mpirun: a recipe error is printed once, without MPI_Abort" \
    '[ $rc -eq 1 ] && [ "$(grep -c "error: override .model.n_layrs=2.: unknown key" <<<"$out")" -eq 1 ] && ! grep -q MPI_ABORT <<<"$out"' \
    || echo "$out" | tail -5
  out=$(mpi --config "$work/recipe.yaml" output_dir="$work/m" dataset.path="$work/missing.txt"); rc=$?
  check "mpirun: a data error is printed once, without MPI_Abort, and leaves no output_dir" \
    '[ $rc -eq 1 ] && [ "$(grep -c "error: .*missing.txt" <<<"$out")" -eq 1 ] && ! grep -q MPI_ABORT <<<"$out" && [ ! -e "$work/m" ]' \
    || echo "$out" | tail -5
else
  echo "FAIL: mpirun not found (apt-get install openmpi-bin)"
  fail=1
fi
exit $fail
