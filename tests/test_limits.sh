# test_limits: VKTRAIN_DEVICE_LIMITS end to end (test_limits_ops compares
# each op under tight limits with the same op without them).
#  1. `vktrain devices` shows the limits in force and marks the tightened
#     ones; K/M suffixes; an unknown key, a bad value or a value below the
#     smallest supported is an error naming it;
#  2. the op tests against the C reference (test_ops_nn) and the model
#     gradient tests (test_model, both families, both archs) pass under
#     storage_range=64K, workgroups=64, allocation=1M, texel_elements=4096
#     (test_ops_nn without the allocation limit: its long-walk cases hold
#     buffers over 1 MiB);
#  3. 3 training steps of llama and gpt2 on both kernel families under
#     those limits follow the unconstrained run: losses rel < 1e-6, final
#     weights within 1e-5 of the model's largest (compare_runs.py; the
#     column sums and matmuls sum in other orders under the limits, and
#     AdamW turns those roundings into weight differences proportional to
#     lr; the runs use AdamW eps 1e-6, as with the default 1e-8 a weight
#     whose gradient is a sum that cancels to ~1e-8 moves by lr·g/(|g| +
#     eps), so a rounding of a few percent in that sum moved it by 1.6e-5
#     of the model's largest after one step, the optimizer's sensitivity
#     rather than the ops'; seen with 1e-6: 5e-7); the shapes put activations, logits, the embedding table and the
#     attention inputs over 64 KiB and the norm rows over 64 workgroups
#     (gpu_dispatch refuses any binding over the limit, so a run that
#     completes bound all of those in ranges);
#  4. shared=4096 makes the tiled matmul (8.5 KiB of tiles at least) refuse clearly.
. "$SRC/tests/script_testing.sh"
export LP_NUM_THREADS=1
TIGHT="storage_range=64K,workgroups=64,allocation=1M,texel_elements=4096"
cmp_py="$py $SRC/tests/compare_runs.py"

# 1. The limits in force, and bad specifications.
out=$(VKTRAIN_DEVICE_LIMITS="$TIGHT,shared=16K" "$VKTRAIN" devices 2>&1)
check "devices shows the tightened storage range" \
  'grep -q "maxStorageBufferRange 65536 bytes.*tightened by VKTRAIN_DEVICE_LIMITS" <<<"$out"'
check "devices shows the tightened workgroup count, allocation, texels and shared memory" \
  'grep -q "count 64 x 64 x 64.*tightened" <<<"$out" && grep -q "each up to 1048576 bytes.*tightened" <<<"$out" &&
   grep -q "maxTexelBufferElements 4096 .*tightened" <<<"$out" && grep -q "shared memory        16384 bytes.*tightened" <<<"$out"'
out=$("$VKTRAIN" devices 2>&1)
check "without the variable nothing is marked tightened" '! grep -q tightened <<<"$out"'
for spec in "storage_bytes=4096:unknown key 'storage_bytes'" "storage_range=12Q:storage_range='12Q' is not a whole number" \
            "workgroups:'workgroups' is not key=value" "storage_range=100:storage_range=100 is below"; do
  out=$(VKTRAIN_DEVICE_LIMITS="${spec%%:*}" "$VKTRAIN" devices 2>&1); rc=$?
  check "VKTRAIN_DEVICE_LIMITS=${spec%%:*} is an error naming it" \
    '[ $rc -ne 0 ] && grep -qF "${spec#*:}" <<<"$out" && grep -q VKTRAIN_DEVICE_LIMITS <<<"$out"'
done

# 2. The op and model tests against their references, under the limits.
for t in "test_ops_nn storage_range=64K,workgroups=64,texel_elements=4096" "test_model $TIGHT"; do
  set -- $t
  VKTRAIN_DEVICE_LIMITS="$2" "$BUILD/tests/$1" > "$work/$1.log" 2>&1
  rc=$?
  check "$1 passes under $2" '[ $rc -eq 0 ] && ! grep -q "Vulkan validation" "$work/$1.log"' || tail -20 "$work/$1.log"
done

# 3. Training under the limits follows the unconstrained run.
for i in $(seq 1 600); do
  echo "the $((i % 7)) quick brown foxes jump over $((i * 13 % 11)) lazy dogs near river $((i % 5))"
done > "$work/corpus.txt"
for arch in llama gpt2; do
  extra=""
  [ $arch = llama ] && extra=", n_kv_heads: 2, hidden_dim: 256"
  cat > "$work/$arch.yaml" <<YAML
seed: 5
output_dir: $work/out
model: {arch: $arch, dim: 64, n_layers: 2, n_heads: 4, max_seq_len: 32$extra}
dataset: {type: text, path: $work/corpus.txt, packed: true}
batch_size: 10
max_steps: 3
optimizer: {lr: 1.0e-3, weight_decay: 0.1, eps: 1.0e-6}
clip_grad_norm: 1.0
log_every_n_steps: 1
YAML
  for family in texel tiled; do
    for run in free tight; do
      limits=""
      [ $run = tight ] && limits="$TIGHT"
      VKTRAIN_KERNELS=$family VKTRAIN_DEVICE_LIMITS="$limits" "$VKTRAIN" train --config "$work/$arch.yaml" \
        output_dir="$work/${arch}_${family}_$run" > "$work/${arch}_${family}_$run.log" 2>&1 \
        || { echo "run $arch $family $run failed"; tail -5 "$work/${arch}_${family}_$run.log"; fail=1; }
    done
    check "$arch $family: 3 steps under the limits follow the unconstrained run" \
      "$cmp_py --loss-rel 1e-6 --norm-rel 1e-5 --weight-rel 1e-5 $work/${arch}_${family}_free $work/${arch}_${family}_tight"
  done
done

# 4. Too little shared memory for a kernel is an error naming it.
out=$(VKTRAIN_KERNELS=tiled VKTRAIN_DEVICE_LIMITS="shared=4096" "$VKTRAIN" train --config "$work/llama.yaml" \
  output_dir="$work/shared" 2>&1); rc=$?
check "shared=4096: the tiled matmul refuses, naming shared memory" \
  '[ $rc -ne 0 ] && grep -q "needs 8704 bytes of shared memory, more than the 4096 bytes" <<<"$out"'
exit $fail
