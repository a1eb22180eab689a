#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors, and runs every
# test with ctest. The run has the Khronos validation layer on
# (VKTRAIN_VALIDATE=1): any validation message fails the test that caused
# it. VKTRAIN_TEST_VALIDATE=0 runs without it. Extra arguments go to ctest
# (e.g. -R ops, or -L unit for one class of tests/suite.cmake's labels);
# without any, the stricter passes below follow the suite. Each phase's
# wall time and the ten slowest tests are printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
phases=()
phase_start=$SECONDS
# phase_done NAME: the time since the previous phase ended, kept for the end.
phase_done() {
  phases+=("$(printf '%-42s %5d s' "$1" $((SECONDS - phase_start)))")
  phase_start=$SECONDS
}
ctest_log=$(mktemp)
summary() {
  echo
  echo "=== wall time by phase"
  printf '%s\n' "${phases[@]}"
  echo "=== the ten slowest tests"
  # ctest's lines: " 12/73 Test #12: NAME ......   Passed   34.56 sec"
  awk '/ Test +#[0-9]+: / && / sec$/ { st = $0; sub(/^.*: [^ ]+ [ .*]*/, "", st); sub(/ +[0-9.]+ sec$/, "", st)
       printf "%8.1f s  %s (%s)\n", $(NF - 1), $4, st }' "$ctest_log" | sort -rn | head -10
  rm -f "$ctest_log"
}
trap summary EXIT
scripts/deps.sh test
# The Hugging Face tokenizer test's oracle is the `tokenizers` package,
# which Debian does not ship: from PyPI, once.
/usr/bin/python3 -c 'import tokenizers' 2>/dev/null ||
  /usr/bin/python3 -m pip install --quiet --break-system-packages --root-user-action=ignore tokenizers
validate="${VKTRAIN_TEST_VALIDATE:-1}"
phase_done "installs"
scripts/build.sh -DVKTRAIN_WERROR=ON -DVKTRAIN_TEST_VALIDATE="$([ "$validate" = 0 ] && echo OFF || echo ON)"
phase_done "build"
export VKTRAIN_VALIDATE="$validate"
# lavapipe: the tests are small; two threads per process is what we have.
export LP_NUM_THREADS="${LP_NUM_THREADS:-2}"
ctest --test-dir build --output-on-failure "$@" | tee "$ctest_log"
phase_done "the suite (ctest)"
# The PyTorch parity test's per-tensor errors, shown from ctest's log (its
# output is hidden when it passes).
awk '/^[0-9]+\/[0-9]+ Testing: test_parity_torch$/ { on = 1 } on && /^<end of output>/ { exit }
     on && f { print } on && /^-+$/ { f = 1 }' build/Testing/Temporary/LastTest.log
[ $# -eq 0 ] && [ "$validate" != 0 ] || exit 0

# Stricter passes: what lavapipe forgives and a GPU would not
# (docs/devices.md, "What lavapipe hides"). Each runs a short subset, both
# kernel families (the tests switch families themselves), and fails on any
# validation message like the suite: the tests labelled strict
# (tests/suite.cmake), and a short training run of each kind.
work=$(mktemp -d)
trap 'rm -rf "$work"; summary' EXIT
for i in $(seq 1 200); do
  echo "the $((i % 7)) quick brown foxes jump over $((i * 13 % 11)) lazy dogs near river $((i % 5))"
done > "$work/train.txt"
for arch in llama gpt2; do
  cat > "$work/$arch.yaml" <<YAML
seed: 1
output_dir: $work/out
model: {arch: $arch, dim: 32, n_layers: 2, n_heads: 4, hidden_dim: 64, max_seq_len: 32}
dataset: {type: text, path: $work/train.txt, val_path: $work/train.txt, packed: true}
batch_size: 4
max_steps: 3
eval_every_n_steps: 3
save_every_n_steps: 2
overwrite: true
YAML
done
# A short training run of each architecture in each family and precision
# (evaluation, a checkpoint, the final save), then sampling from the result.
short_train() {
  local arch family precision
  for arch in llama gpt2; do
    for family in texel tiled; do
      for precision in fp32 reproducible; do
        if ! env "$@" VKTRAIN_KERNELS=$family build/vktrain train --config "$work/$arch.yaml" precision=$precision \
          > "$work/log" 2>&1 ||
          ! env "$@" VKTRAIN_KERNELS=$family build/vktrain generate --model "$work/out" --prompt "the 3 quick" \
            --max-new-tokens 8 >> "$work/log" 2>&1 || grep -q "Vulkan validation" "$work/log"; then
          echo "FAIL: short training run ($arch, $family kernels, precision $precision):"
          tail -30 "$work/log"
          return 1
        fi
      done
    done
  done
  echo "ok: short training runs (llama, gpt2; texel, tiled; fp32, reproducible), sampled"
}
pass() { # name label train(0|1) environment...
  local name=$1 label=$2 train=$3
  shift 3
  echo "=== strict pass: $name"
  env "$@" ctest --test-dir build --output-on-failure -L "^$label\$"
  [ "$train" = 0 ] || short_train "$@"
  phase_done "strict pass: $name"
}
# Synchronization validation: a missing or wrong barrier between dispatches
# and copies, within a command buffer and across submits.
pass "synchronization validation" strict 1 \
  VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT:VALIDATION_CHECK_ENABLE_SYNCHRONIZATION_VALIDATION_QUEUE_SUBMIT
# GPU-assisted validation: a shader reading or writing past a buffer. On
# lavapipe it is some 50 times slower (every shader instrumented, every
# submit waited for and its record read back: test_ops_nn takes minutes, a
# training run minutes a step), so this pass runs the optimizer and
# descriptor tests only (label gpu_assisted); test_validation_passes (in
# the suite) shows it catches an out-of-bounds read.
pass "GPU-assisted validation" gpu_assisted 0 \
  VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_GPU_ASSISTED_EXT
# Device-local buffers and staged copies, the path of every discrete GPU.
pass "forced staging" strict 1 VKTRAIN_FORCE_STAGING=1
# New buffers full of NaN: a read of memory nothing wrote shows.
pass "NaN-filled buffers" strict 1 VKTRAIN_FILL_NAN=1
