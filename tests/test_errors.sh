# test_errors: the catalog of bad input and failures — each case run for
# real, its exit status checked and its message required to hold a stated
# excerpt — and docs/errors.md, which lists the same cases with the
# messages these runs print. The page is generated here from the runs and
# must equal the committed one: a case added, removed or reworded fails
# this test until docs/errors.md is rewritten with
#     VKTRAIN_UPDATE_DOCS=1 ctest --test-dir build -R test_errors
# (then review the diff). Every run works in one folder with relative
# paths, so the messages do not depend on where the test runs; what does
# vary between machines (checksums of trained weights, a loss value) is
# replaced by a placeholder, <hex> or <x>. The message of a case is the
# lines vktrain prints as errors and warnings, and for signals its stop
# lines. The cases with more to check (the resulting files, mpirun) have
# their own tests: test_config_cli, test_run_errors, test_nonfinite,
# test_signals, test_safetensors.
. "$SRC/tests/script_testing.sh"
cd "$work"

# --- Fixtures: a tiny recipe, a model trained 2 steps, files to break. ---
for i in $(seq 1 200); do
  echo "the $((i % 7)) quick brown foxes jump over $((i * 13 % 11)) lazy dogs near river $((i % 5))"
done > corpus.txt
cat > recipe.yaml <<'YAML'
seed: 7
output_dir: out
model: {arch: llama, dim: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, hidden_dim: 64, max_seq_len: 32}
dataset: {type: text, path: corpus.txt, packed: true}
batch_size: 4
max_steps: 4
save_every_n_steps: 2
optimizer: {lr: 3.0e-3}
YAML
vk() { "$VKTRAIN" "$@"; }
train() { "$VKTRAIN" train --config recipe.yaml "$@"; }
train output_dir=trained > trained.log 2>&1 || { echo "FAIL: the fixture run"; tail -5 trained.log; exit 1; }

# Model folders for model.init_from, each with one fault.
$py - <<'PY'
import json, os, shutil, struct

def read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]

def write(path, header, data):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    open(path, "wb").write(struct.pack("<Q", len(text)) + text + data)

def folder(name, header=None, data=None, raw=None):
    os.makedirs(name, exist_ok=True)
    shutil.copy("trained/config.json", name)
    path = name + "/model.safetensors"
    if raw is not None:
        open(path, "wb").write(raw)
    else:
        write(path, header, data)

header, data = read("trained/model.safetensors")
folder("st_header", raw=struct.pack("<Q", 12) + b"not json!!!!")
folder("st_short", raw=open("trained/model.safetensors", "rb").read()[:3000])
h = json.loads(json.dumps(header)); h["model.norm.weight"]["dtype"] = "I32"
folder("st_dtype", h, data)
h = json.loads(json.dumps(header)); h["model.layers.0.mlp.up_gate.weight"] = h.pop("model.layers.0.mlp.up_proj.weight")
folder("st_unknown", h, data)
h = json.loads(json.dumps(header)); del h["model.norm.weight"]
folder("st_missing", h, data)
h = json.loads(json.dumps(header)); h["model.norm.weight"]["shape"] = [4, 8]
folder("st_shape", h, data)
t = header["model.layers.0.mlp.up_proj.weight"]; at = t["data_offsets"][0] + 4 * 5
folder("st_nan", header, data[:at] + struct.pack("<f", float("nan")) + data[at + 4:])
os.makedirs("cfg_json", exist_ok=True); open("cfg_json/config.json", "w").write('{"model_type": "llama",\n "hidden_size": 32,,}\n')
os.makedirs("cfg_type", exist_ok=True)
c = json.load(open("trained/config.json")); c["model_type"] = "bert"; json.dump(c, open("cfg_type/config.json", "w"))
os.makedirs("cfg_key", exist_ok=True)
c = json.load(open("trained/config.json")); del c["num_hidden_layers"]; json.dump(c, open("cfg_key/config.json", "w"))
open("tok_json.json", "w").write('{"model": {"type": "BPE", "vocab": {"a": 0}\n')
open("tok_wordpiece.json", "w").write('{"model": {"type": "WordPiece", "vocab": {"a": 0}}}\n')
with open("sft_line.jsonl", "w") as f:
    f.write('{"prompt": "hi", "response": "there"}\n{"prompt": "hi", "response": "there"\n')
with open("masked.jsonl", "w") as f:
    for i in range(8):
        f.write(json.dumps({"prompt": "a prompt longer than the context window of this tiny model %d" % i,
                            "response": "ok"}) + "\n")
with open("shard.bin", "wb") as f:
    f.write(struct.pack("<256i", *([12345, 1, 4] + [0] * 253)) + struct.pack("<4H", 1, 2, 3, 4))
PY
: > empty.txt
: > afile
printf 'output_dir: out\nmodel:\n  dim: 32\n   n_layers: 2\n' > bad_yaml.yaml
printf 'output_dir: out\nmodel:\n  dim: 32\n  n_layrs: 2\n' > bad_key.yaml
# Checkpoints to resume: copies of trained/ (step_2 and step_4).
resumable() { rm -rf "$1" && cp -r trained "$1"; }

# --- The catalog. ---
doc="$work/errors.md"
cat > "$doc" <<'MD'
# What vktrain says when something is wrong

Each case below is run by tests/test_errors.sh, which checks its exit
status and regenerates this page from the messages the runs print (paths
are relative to the folder the runs work in; `<hex>`, `<x>` and `<host>` stand for
checksums, values and host names that differ between machines). Every error names
what is wrong and where (the file, the line and column, the key, the
tensor, the step) and exits non-zero; under mpirun it is printed once.
Status 1 is an error, 2 a command-line mistake, 130 and 143 a stop by
SIGINT and SIGTERM (docs/training.md, "Stopping a run"); a warning alone
leaves the status 0.
MD
section() { printf '\n## %s\n' "$1" >> "$doc"; [ -z "$2" ] || printf '\n%s\n' "$2" >> "$doc"; }
# entry ID STATUS EXCERPT DESCRIPTION COMMAND...: runs COMMAND; its status
# must be STATUS and its message must hold EXCERPT.
entry() {
  local id=$1 want=$2 excerpt=$3 what=$4 out rc shown
  shift 4
  out=$("$@" 2>&1); rc=$?
  shown=$(grep -E '^vktrain(\[rank [0-9]+\])?: (error|warning|SIGINT|SIGTERM)|^stopped by ' <<<"$out" |
    sed -E -e 's/\b[0-9a-f]{16}\b/<hex>/g' -e 's/the loss is [^ ]+ and/the loss is <x> and/' \
      -e 's/ on rank ([0-9]+) \([^,]+, device/ on rank \1 (<host>, device/')
  if [ $rc -eq "$want" ] && [ -n "$shown" ] && grep -qF -- "$excerpt" <<<"$shown"; then
    echo "ok: $id ($what)"
  else
    echo "FAIL: $id ($what): status $rc (want $want), message without '$excerpt':"
    echo "$out" | tail -5
    fail=1
  fi
  printf '\n### %s\n\n%s Status %s.\n\n' "$id" "$what" "$rc" >> "$doc"
  sed 's/^/    /' <<<"$shown" >> "$doc"
}

section "Command line" ""
entry unknown-command 2 "unknown command 'frobnicate'" "A command vktrain does not have." \
  vk frobnicate
entry train-without-config 2 "--config" "\`train\` without a recipe." \
  vk train
entry generate-model-missing 1 "--model: 'nowhere' is not a directory" "\`generate\` from a folder that does not exist." \
  vk generate --model nowhere --prompt hi
entry generate-bad-option 2 "--max-new-tokens: '-3' is not an integer" "An option value out of range." \
  vk generate --model trained --prompt hi --max-new-tokens -3

section "Recipes" "The recipe and its \`key=value\` overrides (docs/recipes.md); these are found before anything runs."
entry recipe-missing 1 "cannot open recipe 'nope.yaml'" "A recipe file that does not exist." \
  vk train --config nope.yaml
entry recipe-yaml 1 "bad_yaml.yaml:4:" "A recipe that is not valid YAML: the line and column." \
  vk train --config bad_yaml.yaml
entry unknown-key 1 "bad_key.yaml:4:3: unknown key 'model.n_layrs' (did you mean 'model.n_layers'?)" \
  "A misspelled key: where it is, and the nearest known key." vk train --config bad_key.yaml
entry bad-value 1 "optimizer.lr: expected a number, got 'fast'" "A value of the wrong type." \
  train optimizer.lr=fast
entry bad-choice 1 "nan_policy: expected one of stop, skip, got 'ignore'" "A value outside a key's choices." \
  train nan_policy=ignore
entry out-of-range 1 "nan_max_skips: 0 is out of range (must be >= 1)" "A number outside a key's range." \
  train nan_max_skips=0
entry resume-and-overwrite 1 "resume and overwrite" "Two keys that exclude each other." \
  train resume=true overwrite=true
entry base-dtype-without-lora 1 "model.base_dtype: bf16 stores frozen weights, and only LoRA freezes them" \
  "A bf16 base without LoRA: only frozen weights may be stored in bf16." train model.base_dtype=bf16
entry nf4-without-lora 1 "model.base_dtype: nf4 stores frozen weights, and only LoRA freezes them" \
  "An NF4 base without LoRA: only frozen weights may be quantized." train model.base_dtype=nf4
entry double-quant-without-nf4 1 "model.nf4_double_quant: quantizes the scales of an NF4 base" \
  "model.nf4_double_quant without an NF4 base." train lora.rank=4 model.nf4_double_quant=true
entry reproducible-batch-size 1 "batch_size: 6 is not a power of two" \
  "precision: reproducible with a batch size that is not a power of two (docs/reproducible.md)." \
  train precision=reproducible batch_size=6
entry reproducible-probe 1 "the start-up probe failed on rank 0" \
  "precision: reproducible on a device that fails the start-up probe (simulated by VKTRAIN_TEST_PROBE; docs/reproducible.md, \"Which devices\")." \
  env VKTRAIN_TEST_PROBE=fail:0 "$VKTRAIN" train --config recipe.yaml output_dir=p_fail precision=reproducible
entry precision-bf16 1 "no bf16 cooperative matrices" \
  "precision: bf16 on a device without bf16 cooperative matrices (docs/devices.md, \"Cooperative matrices\"); nothing is written." \
  train precision=bf16

section "Data" "The dataset files (docs/data.md); read before the model is built, so nothing is left behind."
entry data-missing 1 "missing.txt" "A dataset path that does not exist." \
  train dataset.path=missing.txt
entry jsonl-line 1 "sft_line.jsonl:2" "A JSONL line that is not JSON: the file and line." \
  train dataset.type=sft_jsonl dataset.path=sft_line.jsonl
entry sft-all-masked 1 "set dataset.train_on_input: true" \
  "An SFT set in which every label is masked (only prompts fit the context)." \
  train dataset.type=sft_jsonl dataset.path=masked.jsonl dataset.packed=false
entry val-empty 1 "dataset.val_path: empty.txt holds no label to evaluate" "An empty validation file." \
  train dataset.val_path=empty.txt eval_every_n_steps=2
entry shard-magic 1 "shard.bin" "A token shard with a wrong magic number." \
  train dataset.type=tokens dataset.path=shard.bin

section "output_dir" "Checked at start (docs/training.md, \"Output\")."
entry output-dir-file 1 "output_dir 'afile/out' cannot be made: afile is not a directory" \
  "An output_dir below a file." train output_dir=afile/out
entry output-dir-earlier-run 1 "holds an earlier run" \
  "A fresh run over an earlier run's folder (resume: true continues it, overwrite: true replaces it)." \
  train output_dir=trained

section "config.json (model.init_from)" "The Hugging Face config of the model to start from, read with the recipe."
entry config-json-syntax 1 "cfg_json/config.json:2:" "A config.json that is not JSON: the line and column." \
  train model.init_from=cfg_json
entry config-model-type 1 "unsupported model_type 'bert'" "A model type vktrain does not train." \
  train model.init_from=cfg_type
entry config-missing-key 1 "missing required key 'num_hidden_layers'" "A required key missing." \
  train model.init_from=cfg_key
entry config-disagrees 1 "disagrees with hidden_size = 32" \
  "A recipe key that contradicts the config.json (the model's own file defines it)." \
  train model.init_from=trained model.dim=64

section "Safetensors (model.init_from)" "The weights of the model to start from, read when the model is built."
entry safetensors-header 1 "st_header/model.safetensors" "A header that is not JSON." \
  train model.init_from=st_header
entry safetensors-truncated 1 "st_short/model.safetensors" "A file cut short." \
  train model.init_from=st_short
entry safetensors-dtype 1 "I32" "A tensor type vktrain does not read." \
  train model.init_from=st_dtype
entry safetensors-unknown-tensor 1 "tensor 'model.layers.0.mlp.up_gate.weight' is not a parameter of this llama model" \
  "A tensor the model does not have." train model.init_from=st_unknown
entry safetensors-missing-tensor 1 "tensor 'model.norm.weight' is missing" "A tensor the model needs, absent." \
  train model.init_from=st_missing
entry safetensors-shape 1 "tensor 'model.norm.weight' has shape [4, 8], the model needs [32]" \
  "A tensor of another shape." train model.init_from=st_shape
entry nf4-nonfinite-weight 1 "model.layers.0.mlp.up_proj.weight: element 5 is nan; model.base_dtype nf4 quantizes finite weights only" \
  "A non-finite weight in a base to quantize." train model.init_from=st_nan model.base_dtype=nf4 lora.rank=4 output_dir=nan_out

section "tokenizer.json" "A Hugging Face tokenizer (tokenizer.type: hf), read with the recipe."
entry tokenizer-missing 1 "nowhere.json" "A tokenizer.path that does not exist." \
  train tokenizer.type=hf tokenizer.path=nowhere.json
entry tokenizer-json 1 "tok_json.json" "A tokenizer.json that is not JSON." \
  train tokenizer.type=hf tokenizer.path=tok_json.json
entry tokenizer-model 1 "model.type 'WordPiece' is not supported" "A tokenizer model other than byte-level BPE." \
  train tokenizer.type=hf tokenizer.path=tok_wordpiece.json

section "Checkpoints (resume: true)" "docs/training.md, \"Resume\"."
resumable r_recipe
entry resume-other-recipe 1 "1 key differs (checkpoint -> this run): seed: 7 -> 8" \
  "A resume with another recipe: each differing key with both values." train output_dir=r_recipe resume=true seed=8
entry resume-past-max-steps 1 "is at step 4, past this run's 3 steps" "max_steps below the checkpoint's step." \
  train output_dir=r_recipe resume=true max_steps=3
entry resume-global-batch 1 "Keep W x A x B" "Another global batch (ranks x accumulation x batch_size)." \
  train output_dir=r_recipe resume=true batch_size=8
resumable r_damaged && truncate -s 1000 r_damaged/checkpoints/step_4/model.safetensors
entry resume-damaged 0 "skipping checkpoints/step_4, which cannot be read" \
  "A damaged newest checkpoint: skipped, and the run goes on from the one before." \
  train output_dir=r_damaged resume=true
resumable r_altered && printf 'X' | dd of=r_altered/checkpoints/step_4/optimizer.safetensors bs=1 seek=3000 \
  conv=notrunc 2> /dev/null
entry resume-altered 0 "(the file was altered)" "A checkpoint file changed after it was written." \
  train output_dir=r_altered resume=true
resumable r_none && rm r_none/checkpoints/step_*/train_state.json
entry resume-none-readable 1 "none of the 2 checkpoints in r_none/checkpoints can be read" \
  "No checkpoint can be read." train output_dir=r_none resume=true

section "Signals" "docs/training.md, \"Stopping a run\" (here sent by the test switch VKTRAIN_TEST_SIGNAL)."
entry sigint 130 "stopped by SIGINT after step 2 of 4" "SIGINT (Ctrl-C) during step 2." \
  env VKTRAIN_TEST_SIGNAL=2:INT "$VKTRAIN" train --config recipe.yaml output_dir=s_int
entry sigterm 143 "stopped by SIGTERM after step 2 of 4" "SIGTERM during step 2." \
  env VKTRAIN_TEST_SIGNAL=2:TERM "$VKTRAIN" train --config recipe.yaml output_dir=s_term
entry sigint-twice 130 "SIGINT again: exiting at once" "A second SIGINT." \
  env VKTRAIN_TEST_SIGNAL=2:INT,INT "$VKTRAIN" train --config recipe.yaml output_dir=s_twice

section "Non-finite values and labels" "docs/training.md, \"Non-finite steps\" (a NaN put into a gradient by VKTRAIN_TEST_NAN)."
entry nan-stop 1 "the run stops with nothing of this step applied (nan_policy: stop)" \
  "A non-finite gradient norm, nan_policy: stop (the default)." \
  env VKTRAIN_TEST_NAN=3:0:model.norm.weight "$VKTRAIN" train --config recipe.yaml output_dir=n_stop
entry nan-skip 0 "its update is skipped (nan_policy: skip; 1 in a row, at most 10)" \
  "The same with nan_policy: skip." \
  env VKTRAIN_TEST_NAN=3 "$VKTRAIN" train --config recipe.yaml output_dir=n_skip nan_policy=skip
entry nan-max-skips 1 "after 2 steps in a row were skipped (nan_max_skips: 2)" \
  "Too many non-finite steps in a row (an lr of 1e38)." \
  train output_dir=n_huge optimizer.lr=1e38 nan_policy=skip nan_max_skips=2
entry label-out-of-vocab 1 "outside [0, 259) (model.vocab_size)" \
  "A label outside the vocabulary (VKTRAIN_TEST_BAD_LABEL)." \
  env VKTRAIN_TEST_BAD_LABEL=2 "$VKTRAIN" train --config recipe.yaml output_dir=n_label

section "Writing" ""
mkdir -p full && ln -s /dev/full full/metrics.jsonl
entry metrics-disk-full 1 "cannot write full/metrics.jsonl: No space left on device" \
  "A metrics.jsonl that cannot be written (a full disk)." train output_dir=full resume=true

# --- The page. ---
if [ "${VKTRAIN_UPDATE_DOCS:-0}" = 1 ]; then
  cp "$doc" "$SRC/docs/errors.md"
  echo "docs/errors.md rewritten"
fi
if diff -u "$SRC/docs/errors.md" "$doc" > "$work/doc.diff"; then
  echo "ok: docs/errors.md lists these cases and messages"
else
  echo "FAIL: docs/errors.md differs from the cases run here (VKTRAIN_UPDATE_DOCS=1 rewrites it):"
  head -60 "$work/doc.diff"
  fail=1
fi
exit $fail
