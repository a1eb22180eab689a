# test_profile: `profile: true` on a tiny llama, in both kernel families.
#  1. max_steps=4 prints one table, for steps 2-4: forward, backward and
#     optimizer phases; the kernel rows' shares add up to 100 % (within
#     the rounding of the printed figures) and so do the phases'; every
#     matmul row has GFLOP/s > 0; the losses equal a run without profile
#     (profiling changes no result);
#  2. without the key, or with profile=false, no table is printed;
#  3. the key is not in the recipe hash: a run saved without profile
#     resumes with profile=true (and profiles its steps 7-9);
#  4. under mpirun with 2 ranks, rank 0 alone prints the table.
. "$SRC/tests/script_testing.sh"

# The repository's docs are the corpus.
cat > "$work/recipe.yaml" <<YAML
output_dir: $work/out
model: {arch: llama, dim: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, hidden_dim: 64, max_seq_len: 32}
dataset: {type: text, path: $SRC/docs}
batch_size: 8
max_steps: 4
YAML

# Reads the table from a log: exits non-zero, saying why, unless it is sane.
cat > "$work/check_table.py" <<'PY'
import sys
log, steps = open(sys.argv[1]).read().splitlines(), sys.argv[2]
heads = [l for l in log if l.startswith("profile: device time of ")]
if len(heads) != 1 or not heads[0].startswith("profile: device time of steps " + steps + " "):
    sys.exit("expected one table for steps %s, got %s" % (steps, heads))
start = log.index(heads[0]) + 2  # past the column titles
kernels, phases, matmuls, rows = 0.0, {}, [], 0
for line in log[start:]:
    f = line.split()
    # Under mpirun the log holds every rank's output, and a line of
    # another rank (or of mpirun) can land between the table's rows: only
    # the rows count, up to the last one, "total (kernels with FLOP counts)".
    if not line.startswith("  ") or len(f) < 5 or f[0] not in ("forward", "backward", "optimizer", "total"):
        continue
    rows += 1
    if f[0] == "total":
        if f[1] == "(kernels":
            break
        continue
    share = float(f[2].rstrip("%"))
    if f[1] == "(all)":
        phases[f[0]] = share
        continue
    kernels += share
    if f[1].startswith("matmul"):
        matmuls.append(float(f[5]) if len(f) > 5 else 0.0)
print("  phases", phases, "kernel shares sum %.1f%%" % kernels, "matmul GFLOP/s", matmuls)
if not {"forward", "backward", "optimizer"} <= set(phases):
    sys.exit("phases missing: %s" % phases)
if abs(sum(phases.values()) - 100) > 0.05 * len(phases) + 0.05:
    sys.exit("phase shares add up to %.2f%%" % sum(phases.values()))
if abs(kernels - 100) > 0.05 * rows + 0.05:
    sys.exit("kernel shares add up to %.2f%%" % kernels)
if not matmuls or min(matmuls) <= 0:
    sys.exit("matmul rows without GFLOP/s: %s" % matmuls)
PY

losses() { $py -c "import json,sys; print([json.loads(l)['loss'] for l in open(sys.argv[1])])" "$1/metrics.jsonl"; }

# 1. and 2., in both families.
for family in texel tiled; do
  VKTRAIN_KERNELS=$family "$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/plain" \
    > "$work/plain.log" 2>&1
  check "$family: a run without the key exits 0" '[ $? -eq 0 ]' || cat "$work/plain.log"
  check "$family: without the key, no table" '! grep -q "^profile" "$work/plain.log"'
  VKTRAIN_KERNELS=$family "$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/off" profile=false \
    > "$work/off.log" 2>&1
  check "$family: profile=false prints no table" '[ $? -eq 0 ] && ! grep -q "^profile" "$work/off.log"'
  VKTRAIN_KERNELS=$family "$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/on" profile=true \
    > "$work/on.log" 2>&1
  check "$family: profile=true exits 0" '[ $? -eq 0 ]' || cat "$work/on.log"
  sed -n '/^profile/,$p' "$work/on.log"
  check "$family: one sane table for steps 2-4" '$py "$work/check_table.py" "$work/on.log" 2-4'
  check "$family: the losses equal the run without profile" '[ "$(losses "$work/on")" = "$(losses "$work/plain")" ]'
  rm -rf "$work/plain" "$work/off" "$work/on"
done

# 3. Resume with profile=true from a checkpoint saved without it.
"$VKTRAIN" train --config "$work/recipe.yaml" max_steps=5 > "$work/first.log" 2>&1
check "a 5-step run exits 0" '[ $? -eq 0 ]' || cat "$work/first.log"
"$VKTRAIN" train --config "$work/recipe.yaml" max_steps=10 resume=true profile=true > "$work/resumed.log" 2>&1
check "it resumes with profile=true" '[ $? -eq 0 ] && grep -q "resumed" "$work/resumed.log"' || cat "$work/resumed.log"
check "the resumed run profiles its steps 7-9" '$py "$work/check_table.py" "$work/resumed.log" 7-9'

# 4. Two ranks, one table.
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 mpirun --oversubscribe -np 2 \
  "$VKTRAIN" train --config "$work/recipe.yaml" output_dir="$work/mpi" profile=true > "$work/mpi.log" 2>&1
check "2 ranks: exits 0" '[ $? -eq 0 ]' || cat "$work/mpi.log"
check "2 ranks: one sane table, from rank 0" '$py "$work/check_table.py" "$work/mpi.log" 2-4'

exit $fail
