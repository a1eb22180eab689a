# test_tutorial: docs/tutorial.md's commands run as written. Every fenced
# block that follows a `<!-- tutorial-test -->` line is run, in order, each
# in its own `bash -e -o pipefail`, in a directory laid out like the
# checkout the tutorial works from (build/vktrain, scripts/), with $MODEL a
# tiny random Llama 3.2-Instruct-like folder that transformers writes
# (tests/tutorial_model.py), `python3` the venv's of scripts/deps.sh test
# (transformers==4.44.2 over Debian's Python), and OpenMPI allowed to run as
# root and to oversubscribe, one lavapipe thread per rank. A block that
# fails fails the test. Then the results are checked: the loss fell, the
# plot exists, and the reply `vktrain generate --chat` printed equals the
# one transformers' greedy generate gives for the same question from the
# exported folder (both stop at the end-of-turn token).
. "$SRC/tests/script_testing.sh"
venv=${VKTRAIN_VENV:-$HOME/.cache/vktrain-venv}
if ! "$venv/bin/python" -c 'import transformers, jinja2' 2>/dev/null; then
  echo "FAIL: no transformers or jinja2 in $venv: run scripts/deps.sh test (it makes the venv)"
  exit 1
fi
if ! command -v mpirun >/dev/null; then echo "FAIL: mpirun not found (apt-get install openmpi-bin)"; exit 1; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LP_NUM_THREADS=1
export OMPI_MCA_rmaps_base_oversubscribe=1

"$venv/bin/python" "$SRC/tests/tutorial_model.py" "$work/model" || { echo "FAIL: tutorial_model.py"; exit 1; }
run=$work/checkout
mkdir -p "$run/build"
ln -s "$VKTRAIN" "$run/build/vktrain"
ln -s "$SRC/scripts" "$run/scripts"

# The blocks: the fenced block after each marker line.
awk -v dir="$work" '
  /^<!-- tutorial-test -->$/ { want = 1; next }
  want && /^```/ && !inside { inside = 1; n++; file = sprintf("%s/block%02d.sh", dir, n); next }
  inside && /^```$/ { inside = 0; want = 0; close(file); next }
  inside { print > file }
' "$SRC/docs/tutorial.md"
blocks=("$work"/block*.sh)
check "docs/tutorial.md has its 6 tested blocks" '[ ${#blocks[@]} -eq 6 ]'

for b in "${blocks[@]}"; do
  n=$(basename "$b" .sh)
  start=$SECONDS
  (cd "$run" && MODEL="$work/model" PATH="$venv/bin:$PATH" timeout 300 bash -e -o pipefail "$b") \
    > "$work/$n.out" 2>&1
  rc=$?
  check "$n ($(head -c 60 "$b" | head -1)) exits 0 ($((SECONDS - start)) s)" '[ $rc -eq 0 ]'
  if [ $rc -ne 0 ]; then tail -30 "$work/$n.out"; break; fi
done

out=$run/out/tutorial
check "the run trained on 2 ranks" 'grep -q "2 rank(s)" "$work/block03.out" && grep -q "^  rank 1: " "$work/block03.out"'
check "the run wrote the model folder with the tokenizer and its chat template" \
  '[ -f "$out/model.safetensors" ] && [ -f "$out/tokenizer.json" ] && grep -q chat_template "$out/tokenizer_config.json"'
check "the loss fell (mean of the last 5 steps below the first step's)" "$py - '$out/metrics.jsonl' <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
loss = [r['loss'] for r in rows if r.get('loss') is not None]
val = [r['val_loss'] for r in rows if 'val_loss' in r]
print('  loss %.4f -> %.4f, val_loss %s' % (loss[0], sum(loss[-5:]) / 5, ' '.join('%.4f' % v for v in val)))
sys.exit(not (len(loss) == 40 and sum(loss[-5:]) / 5 < loss[0] and len(val) == 4))
PY"
check "plot_metrics drew out/tutorial/metrics.png" '[ -s "$out/metrics.png" ]'
vk=$(cat "$work/block05.out" 2>/dev/null)
hf=$(tail -1 "$work/block06.out" 2>/dev/null)
printf '  vktrain generate: %q\n  transformers:     %q\n' "$vk" "$hf"
check "generate --chat's reply equals transformers' greedy generate from the export" '[ -n "$vk" ] && [ "$vk" = "$hf" ]'
exit $fail
