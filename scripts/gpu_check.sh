#!/usr/bin/env bash
# gpu_check: one prepared check of vktrain on this machine's Vulkan device,
# about 7 minutes on a GPU. It
#   1. builds without MPI into build-gpucheck/ (or uses the build in
#      GPU_CHECK_BUILD, e.g. one carried from a machine with the toolchain);
#   2. prints the device (`vktrain devices`);
#   3. runs the op, flash attention, model, large, generate, reproducible-mode and PyTorch
#      parity tests with the Khronos validation layer on (any message fails
#      the test), and a short training in precision: reproducible whose
#      model.safetensors must have the bytes the --pack machine's lavapipe
#      wrote (build-gpucheck/repro_reference.txt): the same bits across
#      vendors; the cooperative-matrix matmul (test_coopmat, and where
#      the device has bf16 ones test_parity_torch.py bf16), without the
#      layer, which predates the extension;
#   4. runs the matmul and model benchmarks, the same matmul shapes in
#      PyTorch on the GPU (fp32, TF32 off), and GPT-2 124M training steps in
#      vktrain and in PyTorch eager on the same GPU; on a GPU also the
#      steps with the attention in rows (VKTRAIN_FLASH=rows, against the
#      default blocks), the reproducible mode's steps, both modes' profiles
#      by kernel, bench_attention at GPT-2's heads in blocks and in rows,
#      bench_matmul with each tile configuration forced and without
#      split-k (VKTRAIN_TILED_SPLITK=1), tn in 4 parts and the reduction
#      in steps of 16 (VKTRAIN_TILED_BK=16), the large tiles in 32 x 64
#      blocks per 32 invocations (VKTRAIN_TILED_WARPTILE=1), GPT-2's steps
#      without split-k, and bench_attention in 32-row blocks, with dk and
#      dv in two kernels (VKTRAIN_FLASH_DKV=split) and at head size 128 in
#      8- and 16-row ones (VKTRAIN_FLASH_BLOCK_ROWS); where the device has
#      bf16 cooperative matrices, bench_matmul on them against PyTorch's
#      bf16 matmul, and GPT-2's steps in precision: bf16;
#   5. writes one report, GPU_CHECK_REPORT (default gpu_check_report.md):
#      the device, each test's result and time, the figures and their
#      ratios to PyTorch, and what was skipped and why; GPU_CHECK_LOGS
#      (a .tgz path) keeps every step's log as well.
# GPU_CHECK_TESTS="test_ops test_flash_attention ..." runs only those tests
# (a short run within a lent GPU's remaining minutes; the report lists the
# others as skipped).
# Exit status 1 when a test failed or a step could not run.
#
# On a CPU device (lavapipe, CI) the GPU-only parts are skipped and the
# report says so: PyTorch on CUDA, the GPT-2 124M training comparison, and
# test_large (minutes on a CPU; the suite runs it). Benchmarks then use
# small shapes.
#
# A GPU machine with only a driver and Python with PyTorch (no compiler for
# shaders, no Vulkan loader): on a Debian 12 machine run
#   scripts/gpu_check.sh --pack
# which builds build-gpucheck/ and puts into .gl/ an archive of what the
# check runs from it (build-gpucheck.tar.xz, a few MB) and the Debian
# packages of the Vulkan loader, the validation layer and the libraries
# vktrain and NVIDIA's Vulkan driver load; carry .gl to the GPU machine
# (same repository checkout) and there, as root, run
#   scripts/gpu_check.sh
# It unpacks the archive when build-gpucheck/ has no vktrain, .gl/*.deb
# into / when a library is missing or no device is found, and points the
# loader at NVIDIA's driver in /usr/local/nvidia when it finds no device
# otherwise. GPU_CHECK_PYTHON names the Python with PyTorch
# (default: python3 or /usr/bin/python3, whichever has it).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${GPU_CHECK_BUILD:-build-gpucheck}
report=${GPU_CHECK_REPORT:-gpu_check_report.md}
# The Python with PyTorch: GPU_CHECK_PYTHON, else the first of python3 and
# /usr/bin/python3 that has it.
py=${GPU_CHECK_PYTHON:-}
if [ -z "$py" ]; then
  py=python3
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import torch' 2> /dev/null; then py=$p && break; fi
  done
fi
started=$SECONDS
# The test programs run on the device: those labelled device in
# tests/suite.cmake, as ctest lists them where the build has its test files,
# else as --pack wrote them into the archive (device_tests.txt); and what
# --pack's archive holds.
device_tests_of() { # build folder
  if command -v ctest > /dev/null && [ -f "$1/CTestTestfile.cmake" ]; then
    ctest --test-dir "$1" -N -L '^device$' | sed -n 's/^ *Test *#[0-9]*: *//p'
  elif [ -f "$1/device_tests.txt" ]; then
    cat "$1/device_tests.txt"
  fi
}
packed=(vktrain repro_reference.txt device_tests.txt bench/bench_matmul bench/bench_model bench/bench_attention
  tests/tools/parity_driver tests/test_coopmat)

configure_and_build() {
  mkdir -p "$build"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DVKTRAIN_WITH_MPI=OFF > "$build/gpu_check_build.log" 2>&1 &&
    cmake --build "$build" -j"$(nproc)" >> "$build/gpu_check_build.log" 2>&1 ||
    { tail -30 "$build/gpu_check_build.log"; return 1; }
}

# repro_train VKTRAIN DIR: 3 steps of a small llama in precision:
# reproducible on a generated corpus into DIR; prints the sha256 of its
# model.safetensors.
repro_train() {
  local vkt=$1 dir=$2 i
  mkdir -p "$dir"
  for i in $(seq 1 400); do
    echo "line $i: the $((i % 7)) quick brown foxes jump over $((i * 13 % 11)) lazy dogs near river $((i % 5))"
  done > "$dir/corpus.txt"
  cat > "$dir/recipe.yaml" <<YAML
seed: 7
output_dir: $dir/out
model: {arch: llama, dim: 64, n_layers: 2, n_heads: 4, n_kv_heads: 2, hidden_dim: 160, max_seq_len: 64}
dataset: {type: text, path: $dir/corpus.txt, packed: true}
batch_size: 4
max_steps: 3
precision: reproducible
YAML
  "$vkt" train --config "$dir/recipe.yaml" > "$dir/train.log" 2>&1 || { tail -5 "$dir/train.log" >&2; return 1; }
  sha256sum < "$dir/out/model.safetensors" | cut -d' ' -f1
}

if [ "${1:-}" = --pack ]; then
  set -e
  scripts/deps.sh test
  configure_and_build
  mkdir -p .gl
  # The loader, the validation layer, the libraries vktrain links, and the
  # GL dispatch libraries NVIDIA's Vulkan driver loads, which a machine with
  # only a driver and Python may lack.
  (cd .gl && apt-get download libvulkan1 vulkan-validationlayers libyaml-0-2 libjansson4 \
    libglvnd0 libglx0 libgl1 libegl1 libgles2 libopengl0)
  # The bytes a reproducible training writes here, for the GPU to match.
  ref=$(mktemp -d)
  sum=$(repro_train "$build/vktrain" "$ref")
  echo "$sum $("$build/vktrain" devices 2>&1 | sed -n 's/^\* device [0-9]*: //p' | head -1)" > "$build/repro_reference.txt"
  rm -rf "$ref"
  # What the check runs, a few MB (the build folder is hundreds).
  device_tests_of "$build" > "$build/device_tests.txt"
  [ -s "$build/device_tests.txt" ] || { echo "gpu_check: no test is labelled device in $build" >&2; exit 1; }
  mapfile -t device_tests < "$build/device_tests.txt"
  tar cJf .gl/build-gpucheck.tar.xz -C "$build" "${packed[@]}" "${device_tests[@]/#/tests/}"
  echo "gpu_check: built $build/ and put in .gl/: $(cd .gl && ls | tr '\n' ' ')"
  echo "gpu_check: $("$build/vktrain" devices 2>&1 | grep -o "this build's kernels: [^)]*" | head -1) (cooperative matrices)"
  echo "gpu_check: carry .gl to the GPU machine (same checkout) and run scripts/gpu_check.sh there"
  exit 0
elif [ $# -gt 0 ]; then
  echo "usage: scripts/gpu_check.sh [--pack]" >&2
  exit 2
fi

work=$(mktemp -d)
# GPU_CHECK_LOGS=FILE.tgz keeps every step's log in one archive.
trap '[ -n "${GPU_CHECK_LOGS:-}" ] && tar czf "$GPU_CHECK_LOGS" -C "$work" $(cd "$work" && find . -name "*.log" -o -name "metrics.jsonl"); rm -rf "$work"' EXIT
skipped=()
failed=0
note() { echo "gpu_check: $*"; }
skip() { skipped+=("$1: $2"); note "skipped $1 ($2)"; }

if [ -z "${GPU_CHECK_BUILD:-}" ] && command -v glslc > /dev/null; then
  note "building $build/ (no MPI)"
  configure_and_build || exit 1
fi
case $build in /*) bdir=$build ;; *) bdir=$root/$build ;; esac
vk=$bdir/vktrain
if [ ! -x "$vk" ] && [ -f .gl/build-gpucheck.tar.xz ]; then
  mkdir -p "$bdir" && tar xJf .gl/build-gpucheck.tar.xz -C "$bdir" && note "unpacked the build from .gl/build-gpucheck.tar.xz"
fi
[ -x "$vk" ] || { note "no vktrain in $build/ (and no glslc to build it: see --pack)"; exit 1; }

# The carried Debian packages (--pack) unpacked into /, once, as root.
unpacked=0
unpack_carried() {
  local debs=(.gl/*.deb) f
  [ $unpacked = 0 ] && [ -e "${debs[0]}" ] && [ "$(id -u)" = 0 ] || return 1
  for f in "${debs[@]}"; do dpkg -x "$f" /; done
  ldconfig
  unpacked=1
  note "unpacked ${#debs[@]} carried package(s) from .gl/"
}
# The Vulkan loader, or a library vktrain links, missing.
if ldd "$vk" | grep -q 'not found'; then
  unpack_carried
  ldd "$vk" | grep 'not found' && { note "libraries missing, and no .gl/*.deb to unpack as root (see --pack)"; exit 1; }
fi

# No device: NVIDIA's driver where the loader does not look, then the
# libraries its driver loads.
devices=$("$vk" devices 2>&1)
if ! grep -q '^\* device' <<< "$devices" && [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  devices=$("$vk" devices 2>&1)
fi
if ! grep -q '^\* device' <<< "$devices" && unpack_carried; then
  devices=$("$vk" devices 2>&1)
fi
echo "$devices"
grep -q '^\* device' <<< "$devices" || { note "no usable Vulkan device"; exit 1; }
chosen=$(sed -n '/^\* device/,/^$/p' <<< "$devices")
name=$(sed -n 's/^\* device [0-9]*: //p' <<< "$chosen")
cpu=0
grep -q 'texel (CPU driver)' <<< "$chosen" && cpu=1

layer_json=/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json
# The validation layer missing while the libraries are there: the carried
# package (--pack) unpacked into /.
layer_debs=(.gl/vulkan-validationlayers_*.deb)
if [ ! -f $layer_json ] && [ -e "${layer_debs[0]}" ] && [ "$(id -u)" = 0 ]; then
  dpkg -x "${layer_debs[0]}" / && ldconfig && note "unpacked the validation layer from .gl/"
fi
validate=1
if ! ls $layer_json > /dev/null 2>&1; then
  validate=0
  skip "validation layer" "not installed (Debian: vulkan-validationlayers; --pack carries it)"
fi
torch_cuda=0
if "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
  torch_cuda=1
fi
torch_any=0
"$py" -c 'import torch' 2> /dev/null && torch_any=1

# --- tests --------------------------------------------------------------
rows=()
run_test() { # name command... (RUN_VALIDATE=0: without the validation layer)
  local t=$1 begin=$SECONDS status=0
  shift
  (cd "$bdir/tests" && timeout "${GPU_CHECK_TEST_TIMEOUT:-300}" env VKTRAIN="$vk" SRC="$root" BUILD="$bdir" TOOLS="$bdir/tests/tools" \
    VKTRAIN_VALIDATE=${RUN_VALIDATE:-$validate} "$@") > "$work/$t.log" 2>&1 || status=$?
  if [ $status -eq 0 ] && grep -q 'Vulkan validation:' "$work/$t.log"; then
    status=99
  fi
  local secs=$((SECONDS - begin)) result=pass
  if [ $status -eq 124 ]; then
    result="FAIL (timed out after ${GPU_CHECK_TEST_TIMEOUT:-300} s)"
    failed=1
    tail -40 "$work/$t.log"
  elif [ $status -eq 77 ]; then
    result="skipped: $(grep -m1 SKIPPED "$work/$t.log" | sed 's/.*SKIPPED //')"
    skip $t "$(grep -m1 SKIPPED "$work/$t.log" | sed 's/.*SKIPPED //')"
  elif [ $status -ne 0 ]; then
    result="FAIL (status $status)"
    failed=1
    tail -40 "$work/$t.log"
  fi
  rows+=("| $t | $result | $secs |")
  note "$t: $result, $secs s"
}
# GPU_CHECK_TESTS: a subset of the tests (skip_unlisted NAME: whether NAME
# is left out, and the report says so)
skip_unlisted() {
  [ -n "${GPU_CHECK_TESTS:-}" ] && ! grep -qw -- "$1" <<< "$GPU_CHECK_TESTS" && skip "$1" "not in GPU_CHECK_TESTS"
}
mapfile -t device_tests < <(device_tests_of "$bdir")
if [ ${#device_tests[@]} -eq 0 ]; then
  note "FAIL: no test labelled device in $bdir (ctest, or --pack's device_tests.txt)"
  failed=1
fi
# GPU_CHECK_SUITE_RAN=1 (.ci/run, after scripts/test.sh on this build):
# the suite has just run these tests on this device; they are not run twice.
suite_ran() {
  [ "${GPU_CHECK_SUITE_RAN:-0}" = 1 ] && skip "$1" "scripts/test.sh ran it on this device and build in this run"
}
for t in "${device_tests[@]}"; do
  skip_unlisted $t && continue
  suite_ran $t && continue
  if [ $t = test_large ] && [ $cpu = 1 ]; then
    skip $t "CPU device: minutes here, and the suite (scripts/test.sh) runs it"
    continue
  fi
  run_test $t "./$t"
done
for t in test_parity_torch test_train_parity_torch; do
  skip_unlisted $t && continue
  suite_ran $t && continue
  if [ $torch_any = 0 ]; then
    skip $t "no PyTorch for $py"
    continue
  fi
  run_test $t "$py" "$root/tests/$t.py"
done

# Cooperative matrices (precision: bf16; docs/devices.md): the kernel
# against the C reference, and where the device has bf16 ones one forward
# and backward against PyTorch with bf16-rounded linear layers. Without the
# validation layer: the carried one (Debian 12's, 1.3.239) predates
# VK_KHR_cooperative_matrix.
coop=$("$vk" devices 2> /dev/null | sed -n 's/^ *cooperative matrices *//p' | head -1)
note "cooperative matrices: ${coop:-(not listed)}"
coop_bf16=0
grep -q "bf16 [0-9]" <<< "$coop" && ! grep -q "kernels: none" <<< "$coop" && coop_bf16=1
if ! skip_unlisted test_coopmat; then
  if grep -q "kernels: none" <<< "$coop"; then
    skip test_coopmat "this build has no cooperative-matrix kernels (its glslc lacks them: scripts/sid.sh fetch on the --pack machine)"
  else
    RUN_VALIDATE=0 run_test test_coopmat ./test_coopmat
  fi
fi
if ! skip_unlisted test_parity_torch_bf16; then
  if [ $coop_bf16 = 0 ]; then
    skip "test_parity_torch.py bf16" "no bf16 cooperative matrices here, or no kernels for them (${coop:-none listed})"
  elif [ $torch_any = 0 ]; then
    skip "test_parity_torch.py bf16" "no PyTorch for $py"
  else
    RUN_VALIDATE=0 run_test test_parity_torch_bf16 "$py" "$root/tests/test_parity_torch.py" bf16
  fi
fi

# The same bytes as the --pack machine (lavapipe) in precision: reproducible.
begin=$SECONDS
if sum=$(repro_train "$vk" "$work/repro"); then
  if [ -f "$bdir/repro_reference.txt" ]; then
    read -r want wdev < "$bdir/repro_reference.txt"
    if [ "$sum" = "$want" ]; then
      result="pass: the bytes of $wdev"
    else
      result="FAIL: model.safetensors differs from $wdev's ($sum vs $want)"
      failed=1
    fi
  else
    result="pass (ran; no repro_reference.txt from --pack to compare with)"
    skip "reproducible bytes across devices" "no $build/repro_reference.txt (scripts/gpu_check.sh --pack writes it)"
  fi
else
  result="FAIL (the run failed: $(grep -m1 'error' "$work/repro/train.log" | cut -c1-200))"
  failed=1
fi
rows+=("| reproducible training, same bytes as the --pack machine | $result | $((SECONDS - begin)) |")
note "reproducible training: $result"

# --- benchmarks ---------------------------------------------------------
bench=() matmul_runs=() attention_runs=() # the last two: on a GPU (below)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'; }
if [ $cpu = 1 ]; then
  M=1024 N=768 K=768 R=3 model_args=()
else
  M=8192 N=3072 K=768 R=20 model_args=(8 1024 768 12 12) # GPT-2 124M's width, layers and heads at 8 x 1024 tokens
fi
"$bdir/bench/bench_matmul" $M $N $K $R > "$work/matmul.log" 2>&1 ||
  { note "bench_matmul failed"; cat "$work/matmul.log"; failed=1; }
cat "$work/matmul.log"
if [ $cpu = 0 ]; then
  # variants at the same shape, each "log name|environment|layouts|what":
  # each tile configuration forced, without split-k (tn's grid of 144
  # large tiles left an H200's 132 multiprocessors half idle), the default
  # tiles without split-k, tn in 4 parts (the default takes 8 here), the
  # reduction in steps of 16 (half the barriers per product), subgroups
  # of 32 on 32 x 64 blocks (half the shared reads' bytes), and both
  matmul_runs=("tile64|VKTRAIN_TILED_SPLITK=1 VKTRAIN_TILED_TILE=64|nt,nn,tn|without split-k, 64 x 64 tiles"
    "tile128|VKTRAIN_TILED_SPLITK=1 VKTRAIN_TILED_TILE=128|nt,nn,tn|without split-k, 128 x 128 tiles"
    "tiledefault|VKTRAIN_TILED_SPLITK=1|nt,nn,tn|without split-k, the default tiles"
    "splitk4|VKTRAIN_TILED_SPLITK=4|tn|tn in 4 parts"
    "k16|VKTRAIN_TILED_BK=16|nt,nn,tn|steps of 16 along the reduction (against the default's 8 above)"
    "warptile|VKTRAIN_TILED_WARPTILE=1|nt,nn,tn|each 32 invocations on a 32 x 64 block of a large tile"
    "k16_warptile|VKTRAIN_TILED_BK=16 VKTRAIN_TILED_WARPTILE=1|nt,nn,tn|steps of 16 and 32 x 64 blocks")
  # bf16 inputs on cooperative matrices (precision: bf16)
  # (2 x 2 accumulators per subgroup, the default), and with 4 x 4 and 4 x 2
  # (VKTRAIN_COOPMAT_TILE): which workgroup tile suits the GPU
  [ $coop_bf16 = 0 ] || matmul_runs+=("coopbf16|VKTRAIN_MATMUL_INPUTS=bf16|nt,nn,tn|bf16 inputs on cooperative matrices"
    "coopbf16_4x4|VKTRAIN_MATMUL_INPUTS=bf16 VKTRAIN_COOPMAT_TILE=4x4|nt,nn,tn|bf16 inputs, 4 x 4 matrices per subgroup"
    "coopbf16_4x2|VKTRAIN_MATMUL_INPUTS=bf16 VKTRAIN_COOPMAT_TILE=4x2|nt,nn,tn|bf16 inputs, 4 x 2 matrices per subgroup")
  for r in "${matmul_runs[@]}"; do
    IFS='|' read -r n e l _ <<< "$r"
    env $e "$bdir/bench/bench_matmul" $M $N $K $R $l > "$work/matmul_$n.log" 2>&1 ||
      { note "bench_matmul ($e) failed"; cat "$work/matmul_$n.log"; failed=1; }
  done
fi
if [ $torch_cuda = 1 ]; then
  "$py" - $M $N $K $R > "$work/torch_matmul.log" 2>&1 <<'PY' || { note "PyTorch matmul failed"; cat "$work/torch_matmul.log"; }
import sys, torch
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
M, N, K, R = map(int, sys.argv[1:])
g = torch.Generator(device="cuda").manual_seed(0)
X = torch.randn(M, K, device="cuda", generator=g)
W = torch.randn(N, K, device="cuda", generator=g)
dY = torch.randn(M, N, device="cuda", generator=g)
Xb, Wb, dYb = X.bfloat16(), W.bfloat16(), dY.bfloat16()
for name, f in [("nt", lambda: X @ W.T), ("nn", lambda: dY @ W), ("tn", lambda: dY.T @ X),
                ("nt_bf16", lambda: Xb @ Wb.T), ("nn_bf16", lambda: dYb @ Wb), ("tn_bf16", lambda: dYb.T @ Xb)]:
    f()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(R):
        f()
    b.record()
    torch.cuda.synchronize()
    print(f"torch {name} {2.0 * M * N * K * R / (a.elapsed_time(b) * 1e-3) * 1e-9:.2f} GFLOP/s")
PY
  cat "$work/torch_matmul.log"
else
  skip "PyTorch matmul on the GPU" "$([ $torch_any = 1 ] && echo "PyTorch sees no CUDA device" || echo "no PyTorch")"
fi
for l in nt nn tn; do
  v=$(awk -v l=$l '$1 == "vktrain" && $3 == l { print $(NF - 1) }' "$work/matmul.log")
  t=$(awk -v l=$l '$1 == "torch" && $2 == l { print $3 }' "$work/torch_matmul.log" 2> /dev/null)
  bench+=("| matmul $l ${M}x${N}x${K} fp32, GFLOP/s | ${v:--} | ${t:--} | $(ratio "${v:-0}" "${t:-0}") | 0.7x (cuBLAS, TF32 off) |")
done
if [ -f "$work/matmul_coopbf16.log" ]; then
  for l in nt nn tn; do
    v=$(awk -v l=$l '$1 == "vktrain" && $3 == l { print $(NF - 1) }' "$work/matmul_coopbf16.log")
    t=$(awk -v l=${l}_bf16 '$1 == "torch" && $2 == l { print $3 }' "$work/torch_matmul.log" 2> /dev/null)
    bench+=("| matmul $l ${M}x${N}x${K} bf16 inputs (vktrain: cooperative matrices, fp32 out; PyTorch: bf16 out), GFLOP/s | ${v:--} | ${t:--} | $(ratio "${v:-0}" "${t:-0}") | - |")
  done
fi

"$bdir/bench/bench_model" "${model_args[@]}" > "$work/model.log" 2>&1 ||
  { note "bench_model failed"; cat "$work/model.log"; failed=1; }
head -4 "$work/model.log"
v=$(sed -n 's/^\([0-9.]*\) tokens\/s.*/\1/p' "$work/model.log")
bench+=("| llama forward+backward ($(sed -n 's/^device: [^;]*; //p' "$work/model.log")), tokens/s | ${v:--} | - | - | - |")

if [ $cpu = 1 ] || [ $torch_cuda = 0 ]; then
  skip "GPT-2 124M training against PyTorch" "$([ $cpu = 1 ] && echo "CPU device (scripts/bench.sh compares on a CPU)" || echo "PyTorch sees no CUDA device")"
else
  B=8 T=1024 steps=6 warm=2
  [ -f data/examples/tokens_train_000.bin ] || "$py" scripts/gen_example_data.py > /dev/null
  # gpt2_train NAME ARGS...: tokens/s of vktrain's GPT-2 steps after the
  # warm-up, the run in $work/NAME.
  gpt2_train() {
    local n=$1
    shift
    "$vk" train --config configs/gpt2_124m.yaml batch_size=$B model.max_seq_len=$T max_steps=$((warm + steps)) \
      output_dir="$work/$n" log_every_n_steps=1 "$@" > "$work/$n.log" 2>&1 ||
      { note "vktrain GPT-2 training ($n) failed"; tail -20 "$work/$n.log" >&2; failed=1; return; }
    "$py" - "$work/$n/metrics.jsonl" $warm <<'PY' 2> /dev/null
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2]):]
print("%.1f" % (sum(r["tokens"] for r in rows) / sum(r["step_ms"] for r in rows) * 1e3))
PY
  }
  v=$(gpt2_train gpt2)
  "$py" bench/torch_gpt2.py --device cuda --batch $B --seq $T --steps $steps --warmup $warm --threads "$(nproc)" \
    > "$work/torch_gpt2.log" 2>&1 || { note "PyTorch GPT-2 failed"; tail -20 "$work/torch_gpt2.log"; }
  t=$(sed -n 's/^torch tokens\/s \([0-9.]*\).*/\1/p' "$work/torch_gpt2.log")
  bench+=("| GPT-2 124M training B=$B T=$T fp32, tokens/s | ${v:--} | ${t:--} | $(ratio "${v:-0}" "${t:-0}") | 0.5x (eager fp32) |")
  note "GPT-2 124M: vktrain ${v:--} tokens/s, PyTorch ${t:--} tokens/s"
  # the same with the attention's row kernels (VKTRAIN_FLASH=rows): what the
  # blocks (shaders/default/flash_block.comp, the default on GPUs) gain in a step
  w=$(VKTRAIN_FLASH=rows gpt2_train gpt2_rows)
  bench+=("| GPT-2 124M training B=$B T=$T fp32, attention in blocks against rows (\`VKTRAIN_FLASH=rows\`), tokens/s | ${v:--} | ${w:--} (vktrain, rows) | $(ratio "${v:-0}" "${w:-0}") | - |")
  note "GPT-2 124M with the attention in rows: ${w:--} tokens/s"
  # without split-k (VKTRAIN_TILED_SPLITK=1): what it gains the weight
  # gradients in a step
  w=$(VKTRAIN_TILED_SPLITK=1 gpt2_train gpt2_nosplit)
  bench+=("| GPT-2 124M training B=$B T=$T fp32, tn split-k against none (\`VKTRAIN_TILED_SPLITK=1\`), tokens/s | ${v:--} | ${w:--} (vktrain, no split-k) | $(ratio "${v:-0}" "${w:-0}") | - |")
  note "GPT-2 124M without split-k: ${w:--} tokens/s"
  if [ $coop_bf16 = 1 ]; then
    w=$(gpt2_train gpt2_bf16 precision=bf16)
    last_loss() { tail -1 "$work/$1/metrics.jsonl" 2> /dev/null | sed -n 's/.*"loss": *\([0-9.e+-]*\).*/\1/p'; }
    bench+=("| GPT-2 124M training B=$B T=$T, precision: bf16 against fp32 (last step's loss $(last_loss gpt2_bf16) against $(last_loss gpt2)), tokens/s | ${w:--} | ${v:--} (vktrain fp32) | $(ratio "${w:-0}" "${v:-0}") | - |")
    note "GPT-2 124M precision bf16: ${w:--} tokens/s"
  else
    skip "GPT-2 124M in precision: bf16" "no bf16 cooperative matrices here, or no kernels for them"
  fi
  r=$(gpt2_train gpt2_repro precision=reproducible)
  bench+=("| GPT-2 124M training B=$B T=$T, precision: reproducible against fp32, tokens/s | ${r:--} | ${v:--} (vktrain fp32) | $(ratio "${r:-0}" "${v:-0}") | 0.8x |")
  note "GPT-2 124M reproducible: ${r:--} tokens/s"
  # Where the time goes, for the next round of kernel work: each mode's
  # profile of GPT-2's steps, and attention alone at GPT-2's heads.
  for mode in fp32 reproducible; do
    "$vk" train --config configs/gpt2_124m.yaml batch_size=$B model.max_seq_len=$T max_steps=4 profile=true \
      precision=$mode output_dir="$work/profile_$mode" > "$work/profile_$mode.log" 2>&1 ||
      { note "GPT-2 profile ($mode) failed"; tail -5 "$work/profile_$mode.log"; failed=1; }
  done
  # "log name|environment|bench_attention's arguments|what": GPT-2's
  # heads in the default blocks (16 rows), the row kernels, 32-row blocks,
  # dk and dv in two kernels (dkv took 2.35x dq's time), packed documents;
  # head size 128 in the default 8-row blocks and in 16-row ones (8 ran
  # the backward 1.55x faster)
  attention_runs=("attention||8 12 12 64 2|the block kernels (flash_block.comp), the default"
    "attention_rows|VKTRAIN_FLASH=rows|8 12 12 64 2|the row kernels"
    "attention_32|VKTRAIN_FLASH_BLOCK_ROWS=32|8 12 12 64 2|blocks of 32 rows"
    "attention_dkv_split|VKTRAIN_FLASH_DKV=split|8 12 12 64 2|dk and dv in two kernels"
    "attention_docs||8 12 12 64 2 256|packed documents of 256 tokens (pairs of blocks no row sees skipped)"
    "attention_hd128||8 6 6 128 2|head size 128, the default blocks"
    "attention_hd128_16|VKTRAIN_FLASH_BLOCK_ROWS=16|8 6 6 128 2|head size 128, blocks of 16 rows")
  for r in "${attention_runs[@]}"; do
    IFS='|' read -r n e a _ <<< "$r"
    env $e "$bdir/bench/bench_attention" $a > "$work/$n.log" 2>&1 ||
      { note "bench_attention $a ($e) failed"; cat "$work/$n.log"; failed=1; }
  done
fi

# --- report -------------------------------------------------------------
{
  echo "# vktrain gpu_check, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "Device: $name ($([ $cpu = 1 ] && echo "CPU driver, texel kernels" || echo "tiled kernels")); commit $(git rev-parse --short HEAD 2> /dev/null || echo unknown); validation layer $([ $validate = 1 ] && echo on || echo off); $((SECONDS - started)) s in all."
  echo
  echo '```'
  echo "$chosen"
  echo '```'
  echo
  echo "| test | result | seconds |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "| benchmark | vktrain | PyTorch | ratio | target |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${bench[@]}"
  echo
  for mode in fp32 reproducible; do
    [ -f "$work/profile_$mode.log" ] || continue
    echo "GPT-2 124M, precision $mode, device time by kernel (\`profile=true\`):"
    echo
    echo '```'
    sed -n '/^profile:/,/kernels with FLOP counts/p' "$work/profile_$mode.log"
    echo '```'
    echo
  done
  for r in "${matmul_runs[@]/#/matmul_}" "${attention_runs[@]}"; do
    IFS='|' read -r n e a what <<< "$r"
    [ -f "$work/$n.log" ] || continue
    case $n in
    matmul_*) echo "Matmul, $what (\`${e:+$e }bench_matmul $M $N $K $R $a\`):" ;;
    *) echo "Attention alone, $what (\`${e:+$e }bench_attention $a\`):" ;;
    esac
    echo
    echo '```'
    cat "$work/$n.log"
    echo '```'
    echo
  done
  echo "Skipped:"
  [ ${#skipped[@]} -eq 0 ] && echo "- nothing"
  for s in "${skipped[@]}"; do echo "- $s"; done
} > "$report"
note "report written to $report"
cat "$report"
exit $failed
