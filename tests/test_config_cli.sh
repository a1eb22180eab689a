#!/usr/bin/env bash
# test_config_cli: `vktrain train` as users call it: --print-config with an
# override, a misspelled key (file:line:col, the key, a suggestion, non-zero
# exit), bad overrides and flags, the example recipes, --data-only.
set -euo pipefail
fail() { echo "test_config_cli: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

out=$("$VKTRAIN" train --config "$SRC/configs/default.yaml" --print-config optimizer.lr=1e-3)
grep -qx '  lr: 0.001' <<<"$out" || fail "lr 0.001 missing from --print-config:
$out"
grep -qx '  separator: "%"' <<<"$out" || fail "separator missing"
# The printed recipe is itself a recipe that prints the same.
printf '%s\n' "$out" > "$tmp/resolved.yaml"
again=$("$VKTRAIN" train --config "$tmp/resolved.yaml" --print-config)
[ "$out" = "$again" ] || fail "printed recipe does not round-trip"

cat > "$tmp/bad.yaml" <<'YAML'
output_dir: o
model:
  dim: 64
  n_layrs: 2
YAML
if "$VKTRAIN" train --config "$tmp/bad.yaml" 2> "$tmp/err"; then fail "misspelled key accepted"; fi
grep -qF "$tmp/bad.yaml:4:3: unknown key 'model.n_layrs' (did you mean 'model.n_layers'?)" "$tmp/err" ||
    fail "wrong message: $(cat "$tmp/err")"

if "$VKTRAIN" train --config "$SRC/configs/default.yaml" --print-config optimizer.lr=fast 2> "$tmp/err"; then
    fail "bad override accepted"
fi
grep -qF "override 'optimizer.lr=fast': optimizer.lr: expected a number, got 'fast'" "$tmp/err" ||
    fail "wrong message: $(cat "$tmp/err")"
if "$VKTRAIN" train --config "$SRC/configs/default.yaml" --frobnicate 2> "$tmp/err"; then
    fail "unknown flag accepted"
fi
grep -qF "unknown option '--frobnicate'" "$tmp/err" || fail "wrong message: $(cat "$tmp/err")"
if "$VKTRAIN" train 2> /dev/null; then fail "train without --config accepted"; fi

# Run where out/default holds a model (lora_example.yaml fine-tunes the
# model default.yaml makes there; make_model's has max_seq_len 64).
mkdir -p "$tmp/ex/out"
"$TOOLS/make_model" "$tmp/ex/out/default" llama 1 > /dev/null || fail "make_model"
for recipe in "$SRC"/configs/*.yaml; do
    extra=()
    grep -q 'init_from: out/default' "$recipe" && extra=(model.max_seq_len=64)
    (cd "$tmp/ex" && "$VKTRAIN" train --config "$recipe" --print-config "${extra[@]}" > /dev/null) ||
        fail "$recipe does not resolve"
done

printf 'one\n%%\ntwo\n%%\nthree\n' > "$tmp/corpus.txt"
cat > "$tmp/small.yaml" <<YAML
output_dir: $tmp/out
model: {dim: 8, n_layers: 1, n_heads: 2, max_seq_len: 4}
dataset: {type: text, path: $tmp/corpus.txt, separator: "%"}
batch_size: 2
YAML
out=$("$VKTRAIN" train --config "$tmp/small.yaml" --data-only 2>&1) || fail "--data-only failed: $out"
grep -q 'MB/s' <<<"$out" || fail "--data-only printed no rate: $out"
echo "test_config_cli: all checks passed"
