#!/usr/bin/env bash
# The sanitizer pass: builds vktrain with AddressSanitizer and
# UndefinedBehaviorSanitizer (leak checking on, any report fatal) into
# build-sanitize/, runs the fast C unit tests there, then a short training
# run through the paths a unit test does not reach (data loading, eval,
# checkpoints, a SIGINT stop, resume, the final save, generation). CI runs
# it after scripts/test.sh (.ci/run); about 5 minutes on 2 cores, most of
# it the build.
#
# The C tests are those labelled sanitize in tests/suite.cmake. Left out,
# for time: test_ops, test_flash_attention, test_model_memory and
# test_large (minutes each even without sanitizers; the ops they cover run
# in the training run), and the shell and Python tests (many processes,
# mpirun). The validation layer is off: scripts/test.sh runs with it.
#
# Lavapipe: the Vulkan loader unloads the driver at vkDestroyInstance;
# the driver's allocations that it still points to then look leaked, and
# the report has no symbols (frames in "<unknown module>"), so it can be
# neither read nor suppressed. The driver is preloaded (after the ASan
# runtime, which must come first) so that it stays mapped: then nothing
# is reported and no suppression is needed. Should a driver or loader
# version need one, LSAN_OPTIONS=suppressions=FILE with lines such as
# `leak:libvulkan_lvp.so` is the place, never for vktrain's own code.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
build=build-sanitize
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVKTRAIN_WERROR=ON -DCMAKE_C_FLAGS="$san" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" > /dev/null
cmake --build "$build" -j"$(nproc)"

icd=$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json | head -1)
driver=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["ICD"]["library_path"])' "$icd")
# Only the sanitized programs get the preload (a plain program given the
# ASan runtime would be leak-checked too).
sanitized() {
  VK_ICD_FILENAMES="$icd" LD_PRELOAD="$(gcc -print-file-name=libasan.so) $driver" \
    ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" "$@"
}
export VKTRAIN_VALIDATE=0 LP_NUM_THREADS="${LP_NUM_THREADS:-2}"

# The C tests labelled sanitize (tests/suite.cmake), run as ctest would
# (tests/CMakeLists.txt) but each under the preload.
mapfile -t tests < <(ctest --test-dir "$build" -N -L '^sanitize$' | sed -n 's/^ *Test *#[0-9]*: *//p')
[ ${#tests[@]} -gt 0 ] || { echo "FAIL: no test is labelled sanitize in $build"; exit 1; }
failed=()
for t in "${tests[@]}"; do
  start=$SECONDS
  if (cd "$build/tests" && sanitized "./$t" > "$t.log" 2>&1); then
    echo "ok: $t ($((SECONDS - start)) s)"
  else
    echo "FAIL: $t ($((SECONDS - start)) s):"
    tail -40 "$build/tests/$t.log"
    failed+=("$t")
  fi
done

# The training run: a tiny llama on generated text, with evaluation and a
# checkpoint every 2 steps; stopped by SIGINT during step 5; its newest
# checkpoint (step_5) truncated, so the resume falls back to step_4 and
# goes on to step 8; then sampled.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 400); do
  echo "the $((i % 7)) quick brown foxes jump over $((i * 13 % 11)) lazy dogs near river $((i % 5))"
done > "$work/train.txt"
head -40 "$work/train.txt" > "$work/val.txt"
cat > "$work/recipe.yaml" <<YAML
seed: 1
output_dir: $work/out
model: {arch: llama, dim: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, hidden_dim: 64, max_seq_len: 32}
dataset: {type: text, path: $work/train.txt, val_path: $work/val.txt, packed: true}
batch_size: 4
gradient_accumulation_steps: 2
max_steps: 8
eval_every_n_steps: 4
save_every_n_steps: 2
optimizer: {lr: 3.0e-3}
YAML
vk="$build/vktrain"
status=0
VKTRAIN_TEST_SIGNAL=5:INT sanitized "$vk" train --config "$work/recipe.yaml" > "$work/log" 2>&1 || status=$?
if [ $status -ne 130 ] || ! grep -q "^stopped by SIGINT after step 5" "$work/log"; then
  echo "sanitized training run: expected a stop by SIGINT after step 5 (status 130), got status $status:"
  tail -30 "$work/log"
  exit 1
fi
truncate -s 100 "$work/out/checkpoints/step_5/model.safetensors"
sanitized "$vk" train --config "$work/recipe.yaml" resume=true > "$work/log" 2>&1 || { tail -30 "$work/log"; exit 1; }
grep -q "resuming from $work/out/checkpoints/step_4 " "$work/log" ||
  { echo "sanitized training run: the resume did not fall back to step_4:"; tail -30 "$work/log"; exit 1; }
sanitized "$vk" generate --model "$work/out" --prompt "the 3 quick" --max-new-tokens 16 > "$work/log" 2>&1 ||
  { tail -30 "$work/log"; exit 1; }
echo "ok: sanitized training run: stopped by SIGINT, resumed past a damaged checkpoint, sampled"
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAIL: ${failed[*]}"
  exit 1
fi
