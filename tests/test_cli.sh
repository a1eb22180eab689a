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
# The kernel table: one module per `// variant:` line of each shader (one
# for a shader without), counted here from the sources.
out=$("$VKTRAIN" devices --list-kernels); rc=$?
want=0; fams=""
for f in "$SRC"/shaders/*/*.comp; do
  n=$(grep -c '^// variant:' "$f"); [ "$n" -eq 0 ] && n=1; want=$((want + n))
done
listed=$(grep -Ec '^  [a-z0-9_]+ +(common|default|reproducible)/[a-z0-9_]+\.comp' <<<"$out")
check "devices --list-kernels lists every module of the sources ($want)" '[ $rc -eq 0 ] && [ "$listed" -eq "$want" ] && grep -q "^$want modules" <<<"$out"'
check "devices --list-kernels groups the three families" 'grep -q "^common kernels" <<<"$out" && grep -q "^default kernels" <<<"$out" && grep -q "^reproducible kernels" <<<"$out"'
out=$(VKTRAIN_FLASH=block "$VKTRAIN" devices 2>&1)
check "devices names a kernel override that is set" 'grep -q "environment.*: VKTRAIN_FLASH=block" <<<"$out"'
out=$(VKTRAIN_TILED_SPLITK=0 "$VKTRAIN" devices 2>&1); rc=$?
check "a kernel override outside its values stops at start-up, naming it" '[ $rc -ne 0 ] && grep -q "VKTRAIN_TILED_SPLITK=.0.: expected 1..256" <<<"$out"'
out=$(VKTRAIN_FLASH=blocks "$VKTRAIN" train --config "$SRC/configs/default.yaml" max_steps=1 output_dir="$(mktemp -d)/o" 2>&1); rc=$?
check "train refuses a misspelt kernel override before it trains" '[ $rc -ne 0 ] && grep -q "VKTRAIN_FLASH=.blocks.: expected one of rows|block" <<<"$out" && ! grep -q "step 1" <<<"$out"'
out=$(VKTRAIN_DEVICE=99 "$VKTRAIN" devices 2>&1); rc=$?
check "an out-of-range VKTRAIN_DEVICE is a clear error" '[ $rc -ne 0 ] && grep -q "device index 99" <<<"$out"'
exit $fail
