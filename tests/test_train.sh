# test_train: end-to-end training runs of a tiny llama on generated text.
#  1. the loss falls, metrics.jsonl has one line per step with every field,
#     the final model.safetensors + config.json and the last checkpoint exist;
#  2. gradient accumulation: (A, B) = (1, 8), (2, 4), (8, 1) give the same
#     losses (rel. < 1e-5) and grad norms (rel. < 1e-4) for 6 steps; with
#     model.activation_checkpointing the (1, 8) run's final weights are
#     bit-identical;
#  3. kill and resume: a run SIGKILLed after step 15 (checkpoint at 10),
#     resumed, ends with a model.safetensors bit-identical to an
#     uninterrupted run, and its metrics from step 11 on equal the
#     uninterrupted run's (loss, grad_norm, lr, tokens);
#  4. evaluation: val_loss on every eval step, over the validation file;
#     the last one equals the loss of the final model on that file computed
#     by PyTorch (tests/parity_torch_model.py: its own windowing, forward
#     and cross-entropy), rel. < 1e-5;
#  5. init_from: a run started from the first run's output begins at its
#     final loss, not at the random-init loss; a shape key that disagrees
#     with init_from's config.json is an error;
#  6. a global batch without a valid label (SFT prompts longer than the
#     context, so every label is masked) skips its step with a warning, and
#     the next step applies the first update;
#  7. a new run in an output_dir that holds an earlier run is refused;
#     with overwrite: true it replaces it: none of the earlier checkpoints
#     is left.
. "$SRC/tests/script_testing.sh"

for i in $(seq 1 600); do
  echo "the $((i % 7)) quick brown foxes jump over $((i * 13 % 11)) lazy dogs near river $((i % 5))"
done > "$work/corpus.txt"
cat > "$work/recipe.yaml" <<YAML
seed: 7
output_dir: $work/out
model: {arch: llama, dim: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, hidden_dim: 64, max_seq_len: 32}
dataset: {type: text, path: $work/corpus.txt, packed: true}
batch_size: 8
max_steps: 30
optimizer: {lr: 3.0e-3, weight_decay: 0.1}
lr_scheduler: {type: cosine, warmup_steps: 3}
clip_grad_norm: 1.0
log_every_n_steps: 1
YAML

# 1. A short run learns and leaves its outputs.
"$VKTRAIN" train --config "$work/recipe.yaml" > "$work/run1.log" 2>&1
rc=$?
check "training exits 0" '[ $rc -eq 0 ]' || cat "$work/run1.log"
check "metrics.jsonl has 30 lines with every field" \
  "$py -c \"
import json,sys
rows=[json.loads(l) for l in open('$work/out/metrics.jsonl')]
keys={'step','loss','lr','grad_norm','tokens','tokens_per_sec','step_ms'}
sys.exit(not (len(rows)==30 and all(keys<=set(r) for r in rows) and [r['step'] for r in rows]==list(range(1,31))))\""
check "the loss falls by more than 30%" \
  "$py -c \"
import json,sys
rows=[json.loads(l) for l in open('$work/out/metrics.jsonl')]
print('  loss', rows[0]['loss'], '->', rows[-1]['loss'])
sys.exit(not rows[-1]['loss'] < 0.7*rows[0]['loss'])\""
check "final model and config exist" '[ -s "$work/out/model.safetensors" ] && grep -q LlamaForCausalLM "$work/out/config.json"'
check "the last checkpoint is complete" '[ -s "$work/out/checkpoints/step_30/optimizer.safetensors" ] && [ -s "$work/out/checkpoints/step_30/train_state.json" ]'
check "no temporary checkpoint is left" '! ls -a "$work/out/checkpoints" | grep -q tmp'

# 2. Accumulation splits give one trajectory.
for ab in "1 8" "2 4" "8 1"; do
  set -- $ab
  "$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/acc_$1" gradient_accumulation_steps=$1 \
    batch_size=$2 max_steps=6 > "$work/acc_$1.log" 2>&1 || { echo "run A=$1 failed"; cat "$work/acc_$1.log"; fail=1; }
done
check "(A,B) = (1,8), (2,4), (8,1): same losses and grad norms" \
  "$py -c \"
import json,sys
runs=[[json.loads(l) for l in open('$work/acc_%d/metrics.jsonl' % a)] for a in (1,2,8)]
ok=True
for r in runs[1:]:
    for x,y in zip(runs[0],r):
        dl=abs(x['loss']-y['loss'])/abs(x['loss']); dg=abs(x['grad_norm']-y['grad_norm'])/x['grad_norm']
        ok &= dl<1e-5 and dg<1e-4 and x['tokens']==y['tokens']
        print('  step %d loss %.7f vs %.7f (rel %.1e), grad norm rel %.1e' % (x['step'],x['loss'],y['loss'],dl,dg))
sys.exit(not (ok and all(len(r)==6 for r in runs)))\""

# 2b. model.activation_checkpointing gives the same run, bit for bit.
"$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/acc_ckpt" gradient_accumulation_steps=1 \
  batch_size=8 max_steps=6 model.activation_checkpointing=true > "$work/acc_ckpt.log" 2>&1 \
  || { echo "checkpointing run failed"; cat "$work/acc_ckpt.log"; fail=1; }
check "activation checkpointing: final weights bit-identical to the (1,8) run" \
  'cmp -s "$work/acc_1/model.safetensors" "$work/acc_ckpt/model.safetensors"'

# 3. Kill after step 15 (checkpoint at 10), resume, compare with an uninterrupted run.
"$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/full" save_every_n_steps=10 > "$work/full.log" 2>&1
VKTRAIN_KILL_AFTER_STEP=15 "$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/killed" \
  save_every_n_steps=10 > "$work/killed.log" 2>&1
rc=$?
check "the run was killed by SIGKILL (status 137) before finishing" '[ $rc -eq 137 ] && [ ! -e "$work/killed/model.safetensors" ] && [ -d "$work/killed/checkpoints/step_10" ]'
"$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/killed" save_every_n_steps=10 resume=true \
  > "$work/resumed.log" 2>&1
rc=$?
check "the resumed run finishes" '[ $rc -eq 0 ] && grep -q "resuming from" "$work/resumed.log"' || cat "$work/resumed.log"
check "final weights are bit-identical to the uninterrupted run" 'cmp -s "$work/full/model.safetensors" "$work/killed/model.safetensors"'
check "metrics after the resume point match" \
  "$py -c \"
import json,sys
a=[json.loads(l) for l in open('$work/full/metrics.jsonl')]
b=[json.loads(l) for l in open('$work/killed/metrics.jsonl')]
f=lambda r:(r['step'],r['loss'],r['grad_norm'],r['lr'],r['tokens'])
sys.exit(not ([f(r) for r in a]==[f(r) for r in b] and len(a)==30))\""
out=$("$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/killed" resume=true seed=8 2>&1); rc=$?
check "resuming with another recipe is an error naming the hash" '[ $rc -ne 0 ] && grep -q "different recipe" <<<"$out"'
# 4. Evaluation, checked against PyTorch on the final model.
for i in $(seq 1 40); do
  echo "a $((i % 3)) slow red fox walks under $((i * 7 % 9)) busy bees by the lake $((i % 4))"
done > "$work/val.txt"
"$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/eval" max_steps=6 dataset.val_path="$work/val.txt" \
  eval_every_n_steps=3 > "$work/eval.log" 2>&1
check "val_loss is logged at steps 3 and 6 only" \
  "$py -c \"
import json,sys
rows=[json.loads(l) for l in open('$work/eval/metrics.jsonl')]
v=[r['step'] for r in rows if 'val_loss' in r]
print('  val_loss at', v, [round(r['val_loss'],4) for r in rows if 'val_loss' in r])
sys.exit(not v==[3,6])\""
check "the last val_loss equals PyTorch's loss of the final model on the validation file (rel < 1e-5)" \
  "$py - '$work' <<'PY'
import json, sys
import numpy as np, torch
sys.path.insert(0, '$SRC/tests')
from parity_torch_model import BOS, EOS, forward, read_safetensors
work, T = sys.argv[1], 32
c = dict(arch='llama', dim=32, layers=2, heads=4, kv_heads=2, hidden=64, eps=1e-5, theta=10000.0, tied=False)
p = {k: torch.tensor(np.array(v)) for k, v in read_safetensors(work + '/eval/model.safetensors').items()}
# One document (no separator): BOS + the file's bytes + EOS, cut into windows
# of T + 1 tokens every T tokens; each window starts at position 0.
doc = [BOS] + list(open(work + '/val.txt', 'rb').read()) + [EOS]
total, count = 0.0, 0
for off in range(0, len(doc) - 1, T):
    w = torch.tensor(doc[off:off + T + 1])
    n = len(w) - 1
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool))[None]
    logits = forward(c, p, w[None, :-1], torch.arange(n)[None], mask)[0]
    total += torch.nn.functional.cross_entropy(logits.double(), w[1:], reduction='sum').item()
    count += n
rows = [json.loads(l) for l in open(work + '/eval/metrics.jsonl')]
val = [r['val_loss'] for r in rows if 'val_loss' in r]
rel = abs(val[-1] - total / count) / (total / count)
print('  PyTorch %.7f over %d labels, vktrain %.7f (rel %.1e); vktrain at step 3 %.7f' % (total / count, count, val[-1], rel, val[0]))
sys.exit(not rel < 1e-5)
PY"
# 5. init_from.
"$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/cont" model.init_from="$work/out" max_steps=2 \
  > "$work/cont.log" 2>&1
check "init_from starts from the trained weights" \
  "$py -c \"
import json,sys
first=json.loads(open('$work/out/metrics.jsonl').readline())['loss']
last=[json.loads(l) for l in open('$work/out/metrics.jsonl')][-1]['loss']
start=json.loads(open('$work/cont/metrics.jsonl').readline())['loss']
print('  random init', first, 'trained', last, 'init_from step 1', start)
sys.exit(not abs(start-last) < 0.25*abs(first-last))\""
out=$("$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/bad" model.init_from="$work/out" model.dim=64 2>&1); rc=$?
check "init_from with a disagreeing model.dim is an error naming it" '[ $rc -ne 0 ] && grep -q "dim" <<<"$out"'
# 6. N = 0: the first global batch (file order) holds only prompts longer than the context.
for i in $(seq 1 16); do
  if [ $i -le 8 ]; then echo "{\"prompt\": \"a prompt much longer than the context window of this tiny model $i\", \"response\": \"ok\"}"
  else echo "{\"prompt\": \"q$i\", \"response\": \"a short answer $i\"}"; fi
done > "$work/masked.jsonl"
out=$("$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/masked" dataset.type=sft_jsonl \
  dataset.path="$work/masked.jsonl" dataset.packed=false dataset.shuffle=false max_steps=2 2>&1); rc=$?
check "a step without a valid label is skipped with a warning; the next applies the first update (warmup lr 1e-3)" \
  '[ $rc -eq 0 ] && [ "$(grep -c "no valid label in the global batch" <<<"$out")" -eq 1 ] && $py -c "
import json,sys
rows=[json.loads(l) for l in open(\"$work/masked/metrics.jsonl\")]
sys.exit(not ([r[\"step\"] for r in rows]==[2] and abs(rows[0][\"lr\"]-1e-3)<1e-12))"' || echo "$out" | tail -5
# 7. An output_dir that holds an earlier run.
"$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/again" max_steps=4 save_every_n_steps=2 > /dev/null 2>&1
out=$("$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/again" max_steps=2 optimizer.lr=1e-2 2>&1); rc=$?
check "a new run over an earlier one is refused, naming it and the ways out" \
  '[ $rc -eq 1 ] && grep -q "output_dir .* holds an earlier run (2 checkpoints, the newest checkpoints/step_4, metrics.jsonl, model.safetensors): set resume: true to continue it, overwrite: true" <<<"$out"' \
  || echo "$out" | tail -3
"$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/again" max_steps=2 optimizer.lr=1e-2 overwrite=true \
  > /dev/null 2>&1
check "overwrite: true replaces it: only the new run's checkpoint is left" \
  '[ "$(ls -A "$work/again/checkpoints")" = step_2 ] && cmp -s "$work/again/model.safetensors" "$work/again/checkpoints/step_2/model.safetensors" &&
   [ "$(wc -l < "$work/again/metrics.jsonl")" -eq 2 ]'
exit $fail
