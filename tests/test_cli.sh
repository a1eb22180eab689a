# test_cli: the command line's help, version, errors and `devices`.
set -u
fail=0
check() { if ! eval "$2"; then echo "FAIL: $1"; fail=1; else echo "ok: $1"; fi; }

out=$("$VKTRAIN" --help); rc=$?
check "--help exits 0 and shows usage" '[ $rc -eq 0 ] && grep -q "usage: vktrain" <<<"$out"'
out=$("$VKTRAIN" --version); rc=$?
check "--version prints the version" '[ $rc -eq 0 ] && grep -Eq "^vktrain [0-9]+\.[0-9]+\.[0-9]+" <<<"$out"'
out=$("$VKTRAIN" frobnicate 2>&1); rc=$?
check "unknown command is an error naming it" '[ $rc -eq 2 ] && grep -q "unknown command .frobnicate." <<<"$out"'
out=$("$VKTRAIN" --frobnicate 2>&1); rc=$?
check "unknown option is an error naming it" '[ $rc -eq 2 ] && grep -q "unknown option .--frobnicate." <<<"$out"'
out=$("$VKTRAIN" 2>&1); rc=$?
check "no command prints usage and fails" '[ $rc -eq 2 ] && grep -q "usage" <<<"$out"'
out=$("$VKTRAIN" devices --bogus 2>&1); rc=$?
check "devices rejects arguments" '[ $rc -eq 2 ] && grep -q "bogus" <<<"$out"'

out=$("$VKTRAIN" devices); rc=$?
echo "$out"
check "devices exits 0" '[ $rc -eq 0 ]'
check "devices marks a chosen device" 'grep -Eq "^\* device [0-9]+: " <<<"$out"'
check "devices shows limits" 'grep -q "subgroup size" <<<"$out" && grep -q "maxStorageBufferRange" <<<"$out" && grep -q "memory heap" <<<"$out"'
if grep -q llvmpipe <<<"$out"; then
  check "lavapipe shows its subgroup size 8 and the texel kernels" 'grep -q "subgroup size        8" <<<"$out" && grep -q "texel (CPU driver)" <<<"$out"'
fi
out=$(VKTRAIN_DEVICE=99 "$VKTRAIN" devices 2>&1); rc=$?
check "an out-of-range VKTRAIN_DEVICE is a clear error" '[ $rc -ne 0 ] && grep -q "device index 99" <<<"$out"'
exit $fail
