# test_generate_cli: `vktrain generate` on tiny random models written by
# tests/tools/make_model (llama and gpt2): greedy output is, byte for byte,
# the prompt and then the tokens PyTorch's greedy decoding of the same files
# picks (tests/parity_torch_model.py, the whole sequence re-run per token,
# argmax with ties to the lower id; the smallest top-1 margin is printed to
# show the choice is not a near tie), and repeats; a seed repeats a sampled
# output; a full context is noted; --chat writes the plain template on a
# byte model; bad flags, numbers and model paths are errors that name them.
set -u
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/vktrain_gen_XXXXXX")
trap 'rm -rf "$dir"' EXIT

for arch in llama gpt2; do
  mkdir -p "$dir/$arch"
  "$TOOLS/make_model" "$dir/$arch" $arch 3 || { echo "FAIL: make_model $arch"; exit 1; }
  "$VKTRAIN" generate --model "$dir/$arch" --prompt hi --max-new-tokens 8 --temperature 0 > "$dir/$arch.out"; rc=$?
  out=$(cat "$dir/$arch.out")
  printf '%s: %q\n' $arch "$out"
  check "$arch: greedy generation exits 0 and prints the prompt, then PyTorch's greedy tokens" \
    "[ \$rc -eq 0 ] && /usr/bin/python3 - '$dir/$arch' <<'PY'
import json, sys
import numpy as np, torch
sys.path.insert(0, '$SRC/tests')
from parity_torch_model import BOS, EOS, forward, read_safetensors
d = sys.argv[1]
h = json.load(open(d + '/config.json'))
g = lambda *k: next(h[x] for x in k if x in h)
c = dict(arch='llama' if h['model_type'] == 'llama' else 'gpt2', dim=g('hidden_size', 'n_embd'),
         layers=g('num_hidden_layers', 'n_layer'), heads=g('num_attention_heads', 'n_head'),
         kv_heads=g('num_key_value_heads', 'num_attention_heads', 'n_head'), hidden=g('intermediate_size', 'n_inner'),
         eps=g('rms_norm_eps', 'layer_norm_epsilon'), theta=h.get('rope_theta', 1e4), tied=h['tie_word_embeddings'])
p = {k: torch.tensor(np.array(v)) for k, v in read_safetensors(d + '/model.safetensors').items()}
seq, margin = [BOS] + list(b'hi'), float('inf')
for _ in range(8):
    n = len(seq)
    logits = forward(c, p, torch.tensor([seq]), torch.arange(n)[None], torch.tril(torch.ones(n, n, dtype=torch.bool))[None])[0, -1]
    top = torch.topk(logits, 2).values
    margin = min(margin, (top[0] - top[1]).item())
    tok = int(torch.argmax(logits))
    if tok == EOS:
        break
    seq.append(tok)
names = {256: b'<|bos|>', 258: b'<|pad|>'}
want = b'hi' + b''.join(bytes([t]) if t < 256 else names[t] for t in seq[3:]) + b'\n'
got = open(d + '.out', 'rb').read()
print('  PyTorch greedy %r, vktrain %r, smallest top-1 margin %.3g' % (want, got, margin))
sys.exit(got != want)
PY"
  again=$("$VKTRAIN" generate --model "$dir/$arch" --prompt hi --max-new-tokens 8 --temperature 0)
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
# --chat on a model without a chat template (the byte tokenizer): the plain
# form, <|bos|> + "user: hi\n" + "assistant: ", and only the reply printed
pre=$'user: hi\nassistant: '
p=$("$VKTRAIN" generate --model "$dir/llama" --prompt "$pre" --max-new-tokens 8 --temperature 0)
c=$("$VKTRAIN" generate --model "$dir/llama" --chat hi --max-new-tokens 8 --temperature 0); rc=$?
check "--chat writes the plain template and prints the reply that --prompt gives" '[ $rc -eq 0 ] && [ "$pre$c" = "$p" ]'
out=$("$VKTRAIN" generate --model "$dir/llama" --prompt hi --system x 2>&1); rc=$?
check "--system without --chat is an error" '[ $rc -eq 2 ] && grep -q -- "--system goes with --chat" <<<"$out"'
out=$("$VKTRAIN" generate --model "$dir/llama" --chat hi --chat-template jinja 2>&1); rc=$?
check "an unknown --chat-template is an error naming the choices" \
  '[ $rc -eq 2 ] && grep -q -- "--chat-template: .jinja. is not llama3, chatml, llama2, gemma, qwen3, phi3 or plain" <<<"$out"'
out=$("$VKTRAIN" generate --model "$dir/llama" --chat hi --chat-template llama3 2>&1); rc=$?
check "a chat template on a byte model is an error" '[ $rc -eq 1 ] && grep -q "byte tokenizer" <<<"$out"'
out=$("$VKTRAIN" generate --help); rc=$?
check "--help shows the options" '[ $rc -eq 0 ] && grep -q -- "--top-k" <<<"$out"'
exit $fail
