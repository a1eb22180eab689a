# test_signals: a run stopped by a signal, killed while it writes a
# checkpoint, or resumed from a damaged one. A tiny llama at a constant lr
# (so a run's length does not change its steps); "the same as a clean run"
# means the final model.safetensors is equal byte for byte and every
# metrics row has the same loss, grad_norm, lr and tokens.
#  1. SIGINT (from the test hook, during step 3) ends the run after step 3
#     with the checkpoint step_3 and status 130; resuming it gives the
#     clean 8-step run;
#  2. SIGTERM sent from outside while it trains: status 143, the checkpoint
#     of the last step in metrics.jsonl, and resuming it gives a clean run
#     of the same length;
#  3. two SIGINTs during step 3: status 130 at once, no checkpoint written
#     (nor the metrics row of step 3); resuming from step_2 gives the clean
#     run;
#  4. SIGKILL while the step-4 checkpoint is written (VKTRAIN_KILL_IN_
#     CHECKPOINT): in model.safetensors' tensor data, before the directory
#     rename, and just after it: the previous checkpoint is intact, resume
#     goes on from the newest complete one (step_2, step_2, step_4), tidies
#     what the write left, and ends as the clean run;
#  5. a damaged newest checkpoint (a byte changed in optimizer.safetensors,
#     model.safetensors truncated, train_state.json cut short or missing) is
#     skipped with a warning naming the file and the fault, and the run goes
#     on from step_2 to the clean result; a checkpoint left as .step_4.old
#     by an interrupted replacement is moved back; when no checkpoint can be
#     read, resume fails naming the folder;
#  6. under mpirun (2 ranks): SIGTERM on rank 1 alone stops both ranks after
#     the same step (status 143, one checkpoint, replicas resume to the
#     clean 2-rank run); SIGINT to mpirun itself reaches the ranks as
#     SIGTERM after odls_base_sigkill_timeout seconds, and they stop with a
#     checkpoint before mpirun's SIGKILL (mpirun stops reading the ranks'
#     output by then: a progress line must not block the save);
#  7. output into a pipe whose reader has gone (Ctrl-C on `vktrain | tee`
#     ends tee too): the run goes on to the clean result.
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
max_steps: 8
save_every_n_steps: 2
optimizer: {lr: 3.0e-3, weight_decay: 0.1}
lr_scheduler: {type: constant, warmup_steps: 1}
clip_grad_norm: 1.0
YAML
run() { "$VKTRAIN" train --config "$work/recipe.yaml" "$@"; }
# same_run A B: A's final model and metrics rows equal B's.
same_run() {
  cmp -s "$1/model.safetensors" "$2/model.safetensors" && $py - "$1" "$2" <<'PY'
import json, sys
rows = [[{k: r.get(k) for k in ("step", "loss", "grad_norm", "lr", "tokens")} for r in map(json.loads, open(d + "/metrics.jsonl"))]
        for d in sys.argv[1:]]
sys.exit(rows[0] != rows[1])
PY
}
# signal_when_started PID DIR SIGNAL...: once DIR/metrics.jsonl has 3 rows,
# sends PID each SIGNAL; after 60 s without them, SIGKILL. Then waits for it.
signal_when_started() {
  local pid=$1 dir=$2 sig
  shift 2
  for _ in $(seq 600); do
    if [ "$(cat "$dir/metrics.jsonl" 2>/dev/null | wc -l)" -ge 3 ]; then
      for sig in "$@"; do kill -$sig $pid; done
      wait $pid
      return
    fi
    sleep 0.1
  done
  echo "$dir: no 3 steps in 60 s"
  kill -KILL $pid
  wait $pid
}
last_step() { tail -1 "$1/metrics.jsonl" | $py -c 'import json, sys; print(json.load(sys.stdin)["step"])'; }

run output_dir="$work/clean" > "$work/clean.log" 2>&1 || { echo "FAIL: the clean run"; tail -3 "$work/clean.log"; exit 1; }

# 1. SIGINT during step 3.
out=$(VKTRAIN_TEST_SIGNAL=3:INT run output_dir="$work/int" 2>&1); rc=$?
check "SIGINT: status 130 after step 3, naming the checkpoint" \
  '[ $rc -eq 130 ] && grep -q "SIGINT: finishing this step, then writing a checkpoint" <<<"$out" &&
   grep -q "^stopped by SIGINT after step 3 of 8: the checkpoint $work/int/checkpoints/step_3; resume: true continues from it$" <<<"$out" &&
   [ -d "$work/int/checkpoints/step_3" ] && [ ! -e "$work/int/model.safetensors" ] && [ "$(last_step "$work/int")" = 3 ]' \
  || echo "$out" | tail -3
run output_dir="$work/int" resume=true > "$work/int.log" 2>&1
check "SIGINT: resuming gives the clean run" 'same_run "$work/clean" "$work/int"' || tail -3 "$work/int.log"

# 7. The reader of the output goes away after the first bytes.
run output_dir="$work/pipe" 2>&1 | head -c 1 > /dev/null
rc=${PIPESTATUS[0]}
check "output into a closed pipe: the run goes on to the clean result (status $rc)" \
  '[ $rc -eq 0 ] && same_run "$work/clean" "$work/pipe"'

# 2. SIGTERM from outside.
"$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/term" max_steps=100000 save_every_n_steps=0 \
  > "$work/term.log" 2>&1 &
signal_when_started $! "$work/term" TERM; rc=$?
k=$(last_step "$work/term")
check "SIGTERM from outside: status 143 and the checkpoint of the last step logged (step $k)" \
  '[ $rc -eq 143 ] && grep -q "^stopped by SIGTERM after step $k of 100000: the checkpoint $work/term/checkpoints/step_$k;" "$work/term.log" &&
   [ "$(ls "$work/term/checkpoints")" = "step_$k" ]' || tail -3 "$work/term.log"
run output_dir="$work/term" resume=true max_steps=$((k + 2)) > /dev/null 2>&1
run output_dir="$work/clean_term" max_steps=$((k + 2)) save_every_n_steps=0 > /dev/null 2>&1
check "SIGTERM: resuming gives the clean run of the same length" 'same_run "$work/clean_term" "$work/term"'

# 3. Two SIGINTs (from the hook: two sent from outside at once may arrive as one).
out=$(VKTRAIN_TEST_SIGNAL=3:INT,INT run output_dir="$work/twice" 2>&1); rc=$?
check "a second SIGINT exits at once with status 130, writing no checkpoint" \
  '[ $rc -eq 130 ] && grep -q "SIGINT again: exiting at once, without a checkpoint" <<<"$out" &&
   [ "$(ls -A "$work/twice/checkpoints")" = step_2 ] && [ "$(last_step "$work/twice")" = 2 ]' || echo "$out" | tail -3
run output_dir="$work/twice" resume=true > /dev/null 2>&1
check "... and resuming from step_2 gives the clean run" 'same_run "$work/clean" "$work/twice"'

# 4. SIGKILL while the step-4 checkpoint is written.
for case in "data step_2" "rename step_2" "renamed step_4"; do
  point=${case% *} from=${case#* }
  VKTRAIN_KILL_IN_CHECKPOINT=$point:4 run output_dir="$work/kill_$point" > /dev/null 2>&1; rc=$?
  ck="$work/kill_$point/checkpoints"
  case $point in
    data) left='[ -f "$ck/.step_4.tmp/model.safetensors.tmp" ] &&
                [ $(stat -c %s "$ck/.step_4.tmp/model.safetensors.tmp") -lt $(stat -c %s "$ck/step_2/model.safetensors") ] &&
                [ ! -e "$ck/step_4" ]' ;;
    rename) left='[ -f "$ck/.step_4.tmp/train_state.json" ] && [ ! -e "$ck/step_4" ]' ;;
    renamed) left='[ -f "$ck/step_4/train_state.json" ] && [ ! -e "$ck/.step_4.tmp" ]' ;;
  esac
  check "SIGKILL at '$point' of the step-4 checkpoint leaves step_2 whole and step_4 $([ $point = renamed ] && echo complete || echo unpublished)" \
    '[ $rc -eq 137 ] && [ -f "$ck/step_2/train_state.json" ] && '"$left"
  out=$(run output_dir="$work/kill_$point" resume=true 2>&1)
  check "... resume goes on from $from, removes what the write left, and ends as the clean run" \
    'grep -q "resuming from $ck/$from " <<<"$out" && [ -z "$(ls -A "$ck" | grep "^\.")" ] && same_run "$work/clean" "$work/kill_$point"' \
    || echo "$out" | grep -E "resum|error"
done

# 5. A damaged newest checkpoint.
VKTRAIN_KILL_AFTER_STEP=5 run output_dir="$work/two" > /dev/null 2>&1 # leaves step_2 and step_4
damage() { # case dir
  local f="$2/checkpoints/step_4"
  case $1 in
    altered) printf 'X' | dd of="$f/optimizer.safetensors" bs=1 seek=5000 conv=notrunc 2>/dev/null ;;
    truncated) truncate -s 1000 "$f/model.safetensors" ;;
    cut) head -c 20 "$f/train_state.json" > "$f/t" && mv "$f/t" "$f/train_state.json" ;;
    missing) rm "$f/train_state.json" ;;
  esac
}
for case in "altered optimizer.safetensors: its checksum is [0-9a-f]*, train_state.json says [0-9a-f]* (the file was altered)" \
            "truncated model.safetensors has 1000 bytes, train_state.json says [0-9]* (a partial file)" \
            "cut train_state.json:[0-9]*: .*" \
            "missing train_state.json: No such file or directory"; do
  name=${case%% *}
  rm -rf "$work/d_$name" && cp -r "$work/two" "$work/d_$name" && damage $name "$work/d_$name"
  out=$(run output_dir="$work/d_$name" resume=true 2>&1); rc=$?
  check "damaged newest checkpoint ($name): a warning names the file and the fault; the run resumes from step_2 and ends as the clean run" \
    '[ $rc -eq 0 ] && grep -q "warning: resume: skipping checkpoints/step_4, which cannot be read: $work/d_$name/checkpoints/step_4/${case#* }; trying the one before, checkpoints/step_2$" <<<"$out" &&
     grep -q "resuming from $work/d_$name/checkpoints/step_2 " <<<"$out" && same_run "$work/clean" "$work/d_$name"' \
    || echo "$out" | grep -E "resum|error"
done
rm -rf "$work/old" && cp -r "$work/two" "$work/old" && mv "$work/old/checkpoints/step_4" "$work/old/checkpoints/.step_4.old"
out=$(run output_dir="$work/old" resume=true 2>&1)
check "a checkpoint left as .step_4.old (an interrupted replacement) is moved back and resumed from" \
  'grep -q "moved $work/old/checkpoints/.step_4.old back to $work/old/checkpoints/step_4" <<<"$out" &&
   grep -q "resuming from $work/old/checkpoints/step_4 " <<<"$out" && same_run "$work/clean" "$work/old"' \
  || echo "$out" | grep -E "resum|error"
rm -rf "$work/none" && cp -r "$work/two" "$work/none" && damage truncated "$work/none" && rm "$work/none/checkpoints/step_2/config.json"
out=$(run output_dir="$work/none" resume=true 2>&1); rc=$?
check "no readable checkpoint: status 1, both skipped, naming the folder" \
  '[ $rc -eq 1 ] && [ "$(grep -c "warning: resume: skipping" <<<"$out")" -eq 2 ] &&
   grep -q "error: resume: none of the 2 checkpoints in $work/none/checkpoints can be read" <<<"$out"' || echo "$out" | tail -3

# 6. mpirun.
if command -v mpirun > /dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  mpi=(timeout 120 mpirun --oversubscribe -np 2 -x LP_NUM_THREADS=1 -x VKTRAIN_TEST_SIGNAL)
  export VKTRAIN_TEST_SIGNAL=
  "${mpi[@]}" "$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/m_clean" batch_size=4 > /dev/null 2>&1
  out=$(VKTRAIN_TEST_SIGNAL=3:TERM:1 "${mpi[@]}" "$VKTRAIN" train --config "$work/recipe.yaml" \
    output_dir="$work/m_term" batch_size=4 2>&1); rc=$?
  check "W=2: SIGTERM on rank 1 alone stops both ranks after step 3 (status 143, said once)" \
    '[ $rc -eq 143 ] && [ "$(grep -c "^stopped by SIGTERM after step 3 of 8" <<<"$out")" -eq 1 ] &&
     [ "$(ls "$work/m_term/checkpoints")" = "$(printf "step_2\nstep_3")" ]' || echo "$out" | tail -5
  "${mpi[@]}" "$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/m_term" batch_size=4 resume=true > /dev/null 2>&1
  check "W=2: resuming gives the clean 2-rank run" 'same_run "$work/m_clean" "$work/m_term"'

  # mpirun (OpenMPI 4) answers SIGINT/SIGTERM with SIGTERM to the ranks after
  # odls_base_sigkill_timeout seconds, and SIGKILL as many seconds later.
  # It may drop the ranks' last lines of output while it ends the job, so
  # the files are the evidence: the checkpoint of the last step logged.
  mpirun --oversubscribe -np 2 -x LP_NUM_THREADS=1 --mca odls_base_sigkill_timeout 5 "$VKTRAIN" train \
    --config "$work/recipe.yaml" output_dir="$work/m_int" batch_size=4 max_steps=100000 save_every_n_steps=0 \
    > "$work/m_int.log" 2>&1 &
  signal_when_started $! "$work/m_int" INT
  k=$(last_step "$work/m_int")
  check "W=2: SIGINT to mpirun stops the ranks with the checkpoint of their last step ($k)" \
    '[ "$(ls "$work/m_int/checkpoints")" = "step_$k" ] &&
     grep -q "\"step\": $k," "$work/m_int/checkpoints/step_$k/train_state.json"' ||
    { ls -A "$work/m_int/checkpoints"; tail -5 "$work/m_int.log"; }
else
  echo "FAIL: mpirun not found (apt-get install openmpi-bin)"
  fail=1
fi
exit $fail
