# test_memory_plan: the device memory plan that `vktrain train` prints at
# start and `--dry-run` prints alone (src/train/memory_plan.c).
#  1. --dry-run of GPT-2 124M at full context (batch 4 x 1024) exits 0,
#     writes nothing, and shows every category; parameters and gradients
#     are 124,439,808 x 4 bytes = 474.7 MiB each (the published parameter
#     count), optimizer state twice that;
#  2. a recipe far too big (batch_size 1000000) is refused before anything
#     is allocated or written: exit 1, the message names the figures and a
#     batch_size that fits; that batch_size passes --dry-run and one more
#     does not (the hint is the largest that fits) but fits with activation
#     checkpointing, which its hint says; a model whose weights
#     alone do not fit says so; in precision: reproducible (the batch's
#     activations, log2(batch_size) more floats per gradient element) 2^20
#     sequences are refused naming the batch's activations, with a
#     power-of-two hint that passes --dry-run;
#  3. a short real run prints the same plan before it trains;
#  4. LoRA on GPT-2 124M (rank 8 on c_attn): gradients and optimizer state
#     of the adapters only (1.1 and 2.2 MiB), and model.base_dtype: bf16
#     takes 237.1 MiB off the parameters: the 12 layers' 84,934,656
#     linear-weight values and the embeddings' 38,597,376 (wte, the tied
#     head) and 786,432 (wpe) at 2 bytes instead of 4.
. "$(dirname "$0")/script_testing.sh"

for i in $(seq 1 300); do echo "the $((i % 7)) quick brown foxes jump over $i lazy dogs"; done > "$work/corpus.txt"
cat > "$work/gpt2.yaml" <<YAML
output_dir: $work/gpt2
model: {arch: gpt2, dim: 768, n_layers: 12, n_heads: 12, max_seq_len: 1024, vocab_size: 50257}
dataset: {type: text, path: $work/corpus.txt}
batch_size: 4
max_steps: 1
YAML
cat > "$work/tiny.yaml" <<YAML
output_dir: $work/tiny
model: {arch: llama, dim: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, hidden_dim: 64, max_seq_len: 256}
dataset: {type: text, path: $work/corpus.txt, packed: true}
batch_size: 2
max_steps: 2
log_every_n_steps: 1
YAML

# 1. The dry run of GPT-2 124M.
out=$("$VKTRAIN" train --config "$work/gpt2.yaml" --dry-run 2>&1); rc=$?
echo "$out"
check "--dry-run exits 0" '[ $rc -eq 0 ]'
check "--dry-run writes nothing" '[ ! -e "$work/gpt2" ]'
check "parameters and gradients are 474.7 MiB each" \
  'grep -Eq "^  parameters +474\.7 MiB" <<<"$out" && grep -Eq "^  gradients +474\.7 MiB" <<<"$out"'
check "optimizer state is 949.4 MiB" 'grep -Eq "^  optimizer state +949\.4 MiB" <<<"$out"'
check "activations name their micro-batch" \
  'grep -Eq "^  activations .*batch_size 4 x max_seq_len 1024" <<<"$out"'
check "workspace, total against the memory available, host memory" \
  'grep -Eq "^  workspace " <<<"$out" && grep -Eq "^  total .* available \(" <<<"$out" && grep -Eq "^  host memory +474\.7 MiB" <<<"$out"'

# 2. Refusal, with a batch_size that fits.
out=$("$VKTRAIN" train --config "$work/tiny.yaml" batch_size=1000000 2>&1); rc=$?
echo "$out" | tail -n 2
check "a recipe too big exits 1" '[ $rc -eq 1 ]'
check "it is refused before anything is written" '[ ! -e "$work/tiny" ]'
check "the message names the figures" \
  'grep -Eq "error: device memory: the recipe needs [0-9.]+ [GMK]iB on each rank \(activations [0-9.]+ [GMK]iB for batch_size 1000000 x max_seq_len 256\) but [0-9.]+ [GMK]iB is available" <<<"$out"'
fit=$(grep -Eo "batch_size [0-9]+ would fit" <<<"$out" | grep -Eo "[0-9]+")
check "the message names a batch_size that fits" '[ -n "$fit" ]'
if [ -n "$fit" ]; then
  "$VKTRAIN" train --config "$work/tiny.yaml" batch_size=$fit --dry-run > /dev/null 2>&1; rc=$?
  check "batch_size $fit passes --dry-run" '[ $rc -eq 0 ]'
  "$VKTRAIN" train --config "$work/tiny.yaml" batch_size=$((fit + 1)) --dry-run > "$work/dry.log" 2>&1; rc=$?
  check "batch_size $((fit + 1)) fails --dry-run with the same error" \
    '[ $rc -eq 1 ] && grep -q "batch_size $fit would fit" "$work/dry.log"'
  check "its hint says activation checkpointing would fit" \
    'grep -q "or model.activation_checkpointing: true would fit as it is" "$work/dry.log"'
  "$VKTRAIN" train --config "$work/tiny.yaml" batch_size=$((fit + 1)) model.activation_checkpointing=true \
    --dry-run > /dev/null 2>&1; rc=$?
  check "and it does: batch_size $((fit + 1)) with checkpointing passes --dry-run" '[ $rc -eq 0 ]'
fi
# precision: reproducible: batch_size costs the batch's activations and
# log2(batch_size) floats per gradient element (the stack over samples);
# the hint is a power of two (the mode needs one).
big="model.dim=2048 model.n_layers=12 model.n_heads=16 model.n_kv_heads=16 model.hidden_dim=8192 precision=reproducible"
out=$("$VKTRAIN" train --config "$work/tiny.yaml" $big batch_size=1048576 model.max_seq_len=16 --dry-run 2>&1); rc=$?
echo "$out" | tail -n 1
fit=$(grep -Eo "batch_size [0-9]+ would fit" <<<"$out" | grep -Eo "[0-9]+")
check "reproducible: 2^20 sequences per micro-batch are refused, naming the batch's activations" \
  '[ $rc -eq 1 ] && grep -q "activations [0-9.]* [GMK]iB for batch_size 1048576 x max_seq_len 16" <<<"$out"'
check "reproducible: the batch_size that fits is a power of two" \
  '[ -n "$fit" ] && [ $((fit & (fit - 1))) -eq 0 ]'
[ -z "$fit" ] || { "$VKTRAIN" train --config "$work/tiny.yaml" $big batch_size=$fit model.max_seq_len=16 --dry-run > /dev/null 2>&1; rc=$?
  check "reproducible: batch_size $fit passes --dry-run" '[ $rc -eq 0 ]'; }
out=$("$VKTRAIN" train --config "$work/tiny.yaml" model.n_layers=100 model.dim=8192 model.n_heads=32 \
  model.n_kv_heads=32 model.hidden_dim=32768 batch_size=1 --dry-run 2>&1); rc=$?
check "a model too big at any batch says so" \
  '[ $rc -eq 1 ] && grep -Eq "no smaller batch_size or max_seq_len fits; parameters, gradients and optimizer state need [0-9.]+ GiB" <<<"$out"'

# 3. A real run prints the plan first.
"$VKTRAIN" train --config "$work/tiny.yaml" > "$work/run.log" 2>&1; rc=$?
check "a short run trains" '[ $rc -eq 0 ] && [ -s "$work/tiny/model.safetensors" ]' || cat "$work/run.log"
check "and printed its memory plan first" \
  '[ "$(head -n 1 "$work/run.log" | cut -c1-11)" = "memory plan" ] && grep -Eq "^  activations .*batch_size 2 x max_seq_len 256" "$work/run.log"'

# 4. LoRA, and its base in bf16.
figure() { sed -n "s/^  $1 *\([0-9.]*\) MiB.*/\1/p" <<<"$2"; }
lora32=$("$VKTRAIN" train --config "$work/gpt2.yaml" lora.rank=8 --dry-run 2>&1)
lora16=$("$VKTRAIN" train --config "$work/gpt2.yaml" lora.rank=8 model.base_dtype=bf16 --dry-run 2>&1)
echo "$lora16"
check "LoRA: gradients 1.1 MiB, optimizer state 2.2 MiB (the adapters only)" \
  '[ "$(figure gradients "$lora32")" = 1.1 ] && [ "$(figure "optimizer state" "$lora32")" = 2.2 ]'
saved=$(awk -v a="$(figure parameters "$lora32")" -v b="$(figure parameters "$lora16")" 'BEGIN { printf "%.1f", a - b }')
check "base_dtype bf16 takes 237.1 MiB off the parameters (got $saved)" \
  '[ "$saved" = 237.1 ] || [ "$saved" = 237.0 ] || [ "$saved" = 237.2 ]'
check "and nothing off the gradients" '[ "$(figure gradients "$lora16")" = 1.1 ]'
exit $fail
