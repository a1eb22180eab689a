# test_repro_lint: scripts/repro_lint.py, the lint of the reproducible
# mode, on the SPIR-V the build embeds.
#  1. every reproducible shader the build made (shaders/reproducible/*.comp) passes;
#  2. negative controls, each compiled here and each refused with a message
#     naming its fault: a multiply-add, an add and a subtraction without
#     `precise`, a `precise` loop under [[unroll]] (spirv-opt's unroller
#     drops NoContraction from its copies), a division, the
#     built-in exp, sqrt, fma and tanh, a dot product, a matrix product,
#     subgroupAdd of floats, a float atomic add, and a shader without the
#     float controls (SignedZeroInfNanPreserve, RoundingModeRTE).
. "$SRC/tests/script_testing.sh"
lint="$py $SRC/scripts/repro_lint.py"
command -v spirv-dis >/dev/null || { echo "FAIL: spirv-dis not found (apt-get install spirv-tools)"; exit 1; }

# 1. The build's reproducible shaders.
shopt -s nullglob
spvs=("$BUILD"/shaders/repro_*.spv)
check "the build holds reproducible shaders (${#spvs[@]})" '[ ${#spvs[@]} -ge 1 ]'
out=$($lint "${spvs[@]}" 2>&1); rc=$?
check "every reproducible shader of the build passes the lint" '[ $rc -eq 0 ] && [ -z "$out" ]'
[ -n "$out" ] && echo "$out"

# 2. Negative controls: BODY is the shader's main() over float v[] and
# EXTRA goes before it; the lint must exit 1 and print WANT.
refuse() { # NAME WANT BODY [EXTRA] [INCLUDE]
  local name=$1 want=$2 body=$3 extra=${4:-} include=${5-'#include "repro_math.glsl"'}
  printf '#version 450\n%s\n%s\nlayout(local_size_x = 8) in;\nlayout(std430, binding = 0) buffer B { float v[]; };\nvoid main()\n{\n%s\n}\n' \
    "$include" "$extra" "$body" >"$work/$name.comp"
  if ! glslc --target-env=vulkan1.2 -O -I"$SRC/shaders/reproducible" -I"$SRC/shaders/common" -o "$work/$name.spv" "$work/$name.comp" 2>"$work/$name.err"; then
    echo "FAIL: negative control $name does not compile:"; cat "$work/$name.err"; fail=1; return
  fi
  local o r
  o=$($lint "$work/$name.spv" 2>&1); r=$?
  check "lint refuses $name: $want" '[ $r -eq 1 ] && grep -q -- "$want" <<<"$o"'
  [ $r -eq 1 ] && grep -q -- "$want" <<<"$o" || echo "$o"
}
refuse contraction "OpFMul: lacks NoContraction" \
  'v[0] = v[1] * v[2] + v[3];'
refuse plain_add "OpFAdd: lacks NoContraction" \
  'v[0] = v[1] + v[2];'
refuse plain_sub "OpFSub: lacks NoContraction" \
  'v[0] = v[1] - v[2];'
refuse unrolled "lacks NoContraction" \
  'precise float acc = 0.0f; [[unroll]] for (int k = 0; k < 4; k++) { precise float t = v[k] * v[k + 4]; acc = acc + t; } v[0] = acc;' \
  '#extension GL_EXT_control_flow_attributes : require'
refuse division "OpFDiv: forbidden" \
  'v[0] = v[1] / v[2];'
refuse builtin_exp "GLSL.std.450 Exp is not exact" \
  'v[0] = exp(v[1]);'
refuse builtin_sqrt "GLSL.std.450 Sqrt is not exact" \
  'v[0] = sqrt(v[1]);'
refuse builtin_tanh "GLSL.std.450 Tanh is not exact" \
  'v[0] = tanh(v[1]);'
refuse builtin_fma "GLSL.std.450 Fma is not exact" \
  'v[0] = fma(v[1], v[2], v[3]);'
refuse dot "OpDot: forbidden" \
  'precise float d = dot(vec2(v[1], v[2]), vec2(v[3], v[4])); v[0] = d;'
refuse matrix "OpMatrixTimesVector: forbidden" \
  'precise vec2 m = mat2(v[1], v[2], v[3], v[4]) * vec2(v[5], v[6]); v[0] = m.x;'
refuse subgroup_add "OpGroupNonUniformFAdd" \
  'v[gl_LocalInvocationID.x] = subgroupAdd(v[gl_LocalInvocationID.x]);' \
  '#extension GL_KHR_shader_subgroup_arithmetic : require'
refuse float_atomic "OpAtomicFAddEXT: forbidden" \
  'atomicAdd(v[0], v[1]);' \
  '#extension GL_EXT_shader_atomic_float : require'
refuse no_float_controls "does not declare SignedZeroInfNanPreserve" \
  'precise float p = v[1] * v[2]; v[0] = p;' '' ''
refuse no_float_controls_rte "does not declare RoundingModeRTE" \
  'precise float p = v[1] * v[2]; v[0] = p;' '' ''
exit $fail
