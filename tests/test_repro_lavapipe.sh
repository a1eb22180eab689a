# test_repro_lavapipe: the reproducible mode's kernels under the lavapipe
# configurations that change its arithmetic: LP_NATIVE_VECTOR_WIDTH=128 and 512 (subgroup
# sizes 4 and 16; the default 256 gives 8) and GALLIUM_OVERRIDE_CPU_CAPS=sse4.1
# (no AVX, no FMA). Each test program compares the device's bits with the C
# build of the same code, so passing under every configuration means every
# configuration gives the same bits: test_repro_math (14M inputs of the math
# layer), test_repro_probe (the known answers and their digest),
# test_repro_matmul (both kernel families), test_repro_sum,
# test_repro_adamw, test_repro_ops (every routed op of ops.h) and
# test_repro_attention (cross-entropy and attention, both kernel families).
. "$SRC/tests/script_testing.sh"
for config in LP_NATIVE_VECTOR_WIDTH=128 LP_NATIVE_VECTOR_WIDTH=512 GALLIUM_OVERRIDE_CPU_CAPS=sse4.1; do
  for t in test_repro_math test_repro_probe test_repro_matmul test_repro_sum test_repro_adamw test_repro_ops test_repro_attention; do
    out=$(env "$config" "$BUILD/tests/$t" 2>&1); rc=$?
    check "$t under $config" '[ $rc -eq 0 ]'
    [ $rc -eq 0 ] || echo "$out" | tail -20
  done
done
exit $fail
