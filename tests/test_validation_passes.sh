# test_validation_passes: the two validation features scripts/test.sh's
# stricter passes turn on catch what they are there for, and only they:
#   - GPU-assisted validation reports a shader reading past the end of a
#     buffer (test_validation oob);
#   - synchronization validation reports a dispatch reading what the one
#     before it wrote with no barrier between them (test_validation race).
#     (The layer, 1.3.239, does not report two dispatches writing one
#     buffer unordered, nor a read past a bound range inside a buffer.)
# Each run must end through the validation error; without the feature the
# same run reports nothing.
. "$SRC/tests/script_testing.sh"
sync=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT
gpuav=VK_VALIDATION_FEATURE_ENABLE_GPU_ASSISTED_EXT
for c in "oob $gpuav bounds" "race $sync READ-AFTER-WRITE"; do
  read -r mode feature says <<< "$c"
  out=$(VKTRAIN_VALIDATE=1 VK_LAYER_ENABLES=$feature "$BUILD/tests/test_validation" "$mode" 2>&1); rc=$?
  echo "$out" | cut -c1-400 | head -5
  check "$feature reports test_validation $mode" \
    '[ $rc -eq 0 ] && grep -q "ended the run" <<<"$out" && grep -q "$says" <<<"$out"'
  out=$(VKTRAIN_VALIDATE=1 VK_LAYER_ENABLES= "$BUILD/tests/test_validation" "$mode" 2>&1); rc=$?
  check "without it test_validation $mode goes unreported" '[ $rc -eq 1 ] && grep -q "went unreported" <<<"$out"'
done
exit $fail
