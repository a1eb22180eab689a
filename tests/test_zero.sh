# test_zero: dist.zero (ZeRO-1: AdamW state and update sharded over ranks)
# under mpirun on lavapipe, one thread per rank. The oracle is the same run
# without dist.zero.
#  1. (W,A,B) = (2,2,2) and (4,1,2): the run with dist.zero equals the one
#     without it bit for bit (logged losses and norms, final weights, the
#     checkpoint's AdamW state). The update is elementwise on whole tensors
#     and the per-tensor gradient norms are summed over ranks exactly, so
#     the runs differ only if the reduce-scatter sums a gradient in another
#     order than the all-reduce: never on 2 ranks (a + b = b + a), and not
#     with Debian's OpenMPI on 4 at these sizes — a different MPI may, and
#     then only float32 rounding separates them, as (3) checks;
#  2. the optimizer state per rank falls by about W in the memory plan,
#     --dry-run included;
#  3. -np 2 with dist.zero logs the losses of -np 1 with the same global
#     batch (the tolerances of test_dist.sh: summation order only);
#  4. resume: a dist.zero checkpoint of 2 ranks continues on 4 ranks with
#     dist.zero and on 1 rank without it, and a checkpoint without it
#     continues with it on 2 ranks bit for bit;
#  5. ranks with different kernels and AdamW arithmetic (a simulated mixed
#     cluster, which drifts without dist.zero: test_dist.sh) stay identical
#     with no repair: every weight is computed by one rank only;
#  6. a non-finite step under nan_policy: skip is skipped on every rank, as
#     without dist.zero, bit for bit.
. "$SRC/tests/dist_testing.sh"
recipe llama ", n_layers: 3, n_kv_heads: 2" > "$work/llama.yaml" # 2 buckets
# run NAME NP [key=value ...]: one training run into $work/NAME, its log in
# $work/NAME.log; $mpiopts go to mpirun; a run told to die may fail
run() {
  local name=$1 np=$2; shift 2
  mpi "$np" ${mpiopts:-} "$VKTRAIN" train --config "$work/llama.yaml" output_dir="$work/$name" "$@" > "$work/$name.log" 2>&1 ||
    [ -n "${VKTRAIN_KILL_AFTER_STEP:-}" ] ||
    { echo "run $name (-np $np $*) failed:"; tail -5 "$work/$name.log"; fail=1; }
}

# 1. Bit for bit against the same split without dist.zero.
run w1 1
for wab in "2 2 2" "4 1 2"; do
  set -- $wab
  run "plain-$1" "$1" gradient_accumulation_steps=$2 batch_size=$3
  run "zero-$1" "$1" gradient_accumulation_steps=$2 batch_size=$3 dist.zero=1
  check "(W,A,B) = ($1,$2,$3): dist.zero gives the unsharded trajectory bit for bit" \
    "$cmp_py --exact $work/plain-$1 $work/zero-$1"
done
check "the llama gradients span several buckets" 'grep -q "[2-9] bucket(s)" "$work/zero-2.log"'

# 2. The memory plan (rank 0's shard), and the dry run.
opt() { grep -m1 "optimizer state" "$1" | awk '{print $3 * ($4 == "MiB" ? 1024 : 1)}'; }
check "optimizer state per rank: $(opt "$work/plain-4.log") KiB, with dist.zero on 4 ranks $(opt "$work/zero-4.log") KiB (at most 0.35 of it)" \
  "awk 'BEGIN { exit !($(opt "$work/zero-4.log") <= 0.35 * $(opt "$work/plain-4.log")) }'"
check "the plan says the optimizer state is a shard" 'grep -q "optimizer state .*(dist.zero: rank 0.s shard of 4)" "$work/zero-4.log"'
mpi 2 "$VKTRAIN" train --config "$work/llama.yaml" output_dir="$work/dry" dist.zero=1 --dry-run > "$work/dry.log" 2>&1
check "--dry-run under mpirun prints the sharded plan" \
  "grep -q 'shard of 2' $work/dry.log && awk 'BEGIN { exit !($(opt "$work/dry.log") <= 0.6 * $(opt "$work/plain-4.log")) }'"

# 3. The same losses as one rank with the same global batch.
check "-np 2 and -np 4 with dist.zero follow the -np 1 trajectory" "$cmp_py $work/w1 $work/zero-2 $work/zero-4"

# 4. Resume at another W, with and without dist.zero.
ckpt="max_steps=8 save_every_n_steps=4 batch_size=4"
run ref 2 $ckpt dist.zero=1
mpiopts="-x VKTRAIN_KILL_AFTER_STEP" VKTRAIN_KILL_AFTER_STEP=6 run killed 2 $ckpt dist.zero=1
check "the dist.zero run was killed after its step-4 checkpoint" \
  '[ -d "$work/killed/checkpoints/step_4" ] && [ ! -e "$work/killed/model.safetensors" ]'
cp -r "$work/killed" "$work/killed1"
run killed 4 max_steps=8 save_every_n_steps=4 batch_size=2 dist.zero=1 resume=true
check "a 2-rank dist.zero checkpoint continues on 4 ranks with dist.zero" "$cmp_py $work/ref $work/killed"
run killed1 1 max_steps=8 save_every_n_steps=4 batch_size=4 gradient_accumulation_steps=2 resume=true
check "... and on 1 rank without it" "$cmp_py $work/ref $work/killed1"
mpiopts="-x VKTRAIN_KILL_AFTER_STEP" VKTRAIN_KILL_AFTER_STEP=6 run plainkilled 2 $ckpt
run plainkilled 2 $ckpt dist.zero=1 resume=true
check "a 2-rank checkpoint without dist.zero continues with it bit for bit" \
  "$cmp_py --exact --from-step 5 $work/ref $work/plainkilled"

# 5. A mixed cluster needs no repair.
mpi 1 "$VKTRAIN" train --config "$work/llama.yaml" output_dir="$work/mixed" batch_size=4 dist.check_every=1 \
  dist.zero=1 : -np 1 -x VKTRAIN_KERNELS=tiled -x VKTRAIN_ADAMW=fused "$VKTRAIN" train --config "$work/llama.yaml" \
  output_dir="$work/mixed" batch_size=4 dist.check_every=1 dist.zero=1 > "$work/mixed.log" 2>&1
rc=$?
check "a mixed cluster with dist.zero completes" '[ $rc -eq 0 ] && grep -q "rank 1: .*(tiled kernels)" "$work/mixed.log"'
check "... its replicas never differ" \
  '! grep -q "differs" "$work/mixed.log" && grep -q "replicas: identical on all 2 ranks at step 5$" "$work/mixed.log"'

# 6. A skipped non-finite step.
nan="nan_policy=skip batch_size=4"
mpiopts="-x VKTRAIN_TEST_NAN" VKTRAIN_TEST_NAN=3:1 run nan-plain 2 $nan
mpiopts="-x VKTRAIN_TEST_NAN" VKTRAIN_TEST_NAN=3:1 run nan-zero 2 $nan dist.zero=1
check "nan_policy skip: step 3 is skipped with dist.zero as without it, bit for bit" \
  "grep -q '\"step\": 3, .*\"skipped\": true' $work/nan-zero/metrics.jsonl && $cmp_py --exact $work/nan-plain $work/nan-zero"
exit $fail
