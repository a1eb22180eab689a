# test_generate_cli: `vktrain generate` on tiny random models written by
# tests/tools/make_model (llama and gpt2): greedy output starts with the
# prompt and repeats; a seed repeats a sampled output; a full context is
# noted; bad flags, numbers and model paths are errors that name them.
set -u
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/vktrain_gen_XXXXXX")
trap 'rm -rf "$dir"' EXIT

for arch in llama gpt2; do
  mkdir -p "$dir/$arch"
  "$TOOLS/make_model" "$dir/$arch" $arch 3 || { echo "FAIL: make_model $arch"; exit 1; }
  out=$("$VKTRAIN" generate --model "$dir/$arch" --prompt hi --max-new-tokens 5 --temperature 0); rc=$?
  printf '%s: %q\n' $arch "$out"
  check "$arch: greedy generation exits 0 and starts with the prompt" '[ $rc -eq 0 ] && [[ "$out" == hi* ]]'
  again=$("$VKTRAIN" generate --model "$dir/$arch" --prompt hi --max-new-tokens 5 --temperature 0)
  check "$arch: greedy generation repeats" '[ "$out" == "$again" ]'
  a=$("$VKTRAIN" generate --model "$dir/$arch" --prompt "the " --max-new-tokens 20 --temperature 1 --top-k 40 --seed 9)
  b=$("$VKTRAIN" generate --model "$dir/$arch" --prompt "the " --max-new-tokens 20 --temperature 1 --top-k 40 --seed 9)
  check "$arch: the same seed repeats a sampled output" '[ -n "$a" ] && [ "$a" == "$b" ]'
done

# max_seq_len is 64: <|bos|> + 2 prompt bytes leave room for 62 tokens.
err=$("$VKTRAIN" generate --model "$dir/llama" --prompt hi --max-new-tokens 500 --temperature 0 2>&1 >/dev/null); rc=$?
check "a full context stops with a note" '[ $rc -eq 0 ] && grep -q "max_seq_len (64 tokens)" <<<"$err"'

out=$("$VKTRAIN" generate --model "$dir/nope" --prompt hi 2>&1); rc=$?
check "a missing model directory is an error naming it" '[ $rc -eq 1 ] && grep -q "$dir/nope" <<<"$out"'
mkdir -p "$dir/empty"
out=$("$VKTRAIN" generate --model "$dir/empty" --prompt hi 2>&1); rc=$?
check "a directory without config.json names the file" '[ $rc -eq 1 ] && grep -q "$dir/empty/config.json" <<<"$out"'
mkdir -p "$dir/noweights" && cp "$dir/llama/config.json" "$dir/noweights/"
out=$("$VKTRAIN" generate --model "$dir/noweights" --prompt hi 2>&1); rc=$?
check "a directory without weights names model.safetensors" \
  '[ $rc -eq 1 ] && grep -q "$dir/noweights/model.safetensors" <<<"$out"'
out=$("$VKTRAIN" generate --model "$dir/llama" --prompt hi --frobnicate 2>&1); rc=$?
check "an unknown flag is an error naming it" '[ $rc -eq 2 ] && grep -q "unknown option .--frobnicate." <<<"$out"'
out=$("$VKTRAIN" generate --model "$dir/llama" 2>&1); rc=$?
check "a missing --prompt is an error" '[ $rc -eq 2 ] && grep -q -- "--prompt" <<<"$out"'
out=$("$VKTRAIN" generate --prompt hi 2>&1); rc=$?
check "a missing --model is an error" '[ $rc -eq 2 ] && grep -q -- "--model" <<<"$out"'
out=$("$VKTRAIN" generate --model "$dir/llama" --prompt hi --max-new-tokens 5x 2>&1); rc=$?
check "a bad number is an error naming the flag" '[ $rc -eq 2 ] && grep -q -- "--max-new-tokens: .5x." <<<"$out"'
out=$("$VKTRAIN" generate --model "$dir/llama" --prompt hi --temperature -1 2>&1); rc=$?
check "a negative temperature is an error" '[ $rc -eq 2 ] && grep -q -- "--temperature" <<<"$out"'
out=$("$VKTRAIN" generate --model "$dir/llama" --prompt hi --seed 2>&1); rc=$?
check "a flag without its value is an error" '[ $rc -eq 2 ] && grep -q -- "--seed needs a value" <<<"$out"'
out=$("$VKTRAIN" generate --help); rc=$?
check "--help shows the options" '[ $rc -eq 0 ] && grep -q -- "--top-k" <<<"$out"'
exit $fail
