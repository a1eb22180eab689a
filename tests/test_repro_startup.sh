# test_repro_startup: the start-up of precision: reproducible
# (src/repro/repro_setup.c), on one rank and under mpirun with two:
#  1. a run prints "reproducible mode: probe passed on N rank(s), digest
#     0x..." (the same digest for N = 1 and 2) and trains;
#  2. a probe failure simulated on rank 1 (VKTRAIN_TEST_PROBE=fail:1: its
#     first case expects other bits than the device gives): both ranks exit
#     with status 1 before the first step, the error names rank 1, its
#     device and the failing case, and no model is written;
#  3. the ranks' digests made to differ (digest:1, as from another build):
#     both ranks exit 1, the error names ranks 0 and 1 and their digests.
. "$SRC/tests/dist_testing.sh"
recipe llama ", n_layers: 1" > "$work/r.yaml"
run() { # np out [env...]: each rank's status as "rank R exited S" in $work/$out.log
  local np=$1 out=$2
  shift 2
  env "$@" timeout 300 mpirun --oversubscribe -np "$np" -x VKTRAIN_TEST_PROBE -x LP_NUM_THREADS \
    bash -c '"$0" "$@"; echo "rank $OMPI_COMM_WORLD_RANK exited $?"' "$VKTRAIN" train --config "$work/r.yaml" \
    precision=reproducible max_steps=1 batch_size=4 output_dir="$work/$out" > "$work/$out.log" 2>&1
}
digest() { grep -o "probe passed on $1 rank(s), digest 0x[0-9a-f]*" "$work/$2.log" | grep -o '0x.*'; }

"$VKTRAIN" train --config "$work/r.yaml" precision=reproducible max_steps=1 batch_size=4 \
  output_dir="$work/one" > "$work/one.log" 2>&1
check "one rank: the probe passes and the run trains" \
  'grep -q "probe passed on 1 rank(s), digest 0x" "$work/one.log" && [ -f "$work/one/model.safetensors" ]'
run 2 two VKTRAIN_TEST_PROBE=
check "two ranks: the probe passes on both, with one rank's digest, and the run trains" \
  '[ "$(grep -c "exited 0" "$work/two.log")" = 2 ] && [ -n "$(digest 1 one)" ] &&
   [ "$(digest 2 two)" = "$(digest 1 one)" ] && [ -f "$work/two/model.safetensors" ]'

run 2 fail VKTRAIN_TEST_PROBE=fail:1
check "a probe failing on rank 1 stops both ranks with status 1, naming rank 1, its device and the case" \
  '[ "$(grep -c "exited 1" "$work/fail.log")" = 2 ] &&
   grep -q "error: reproducible mode: the start-up probe failed on rank 1 (.*device 0: .*): 1 case(s) gave other bits than IEEE 754: add rounds to nearest" "$work/fail.log" &&
   grep -q "use precision: fp32" "$work/fail.log" &&
   ! grep -q "probe passed\|^step 1" "$work/fail.log" && [ ! -e "$work/fail/model.safetensors" ]'

run 2 digest VKTRAIN_TEST_PROBE=digest:1
check "differing digests stop both ranks with status 1, naming both ranks and digests" \
  '[ "$(grep -c "exited 1" "$work/digest.log")" = 2 ] &&
   grep -q "probe digests differ: rank 0 (.*) 0x[0-9a-f]*, rank 1 (.*) 0x[0-9a-f]*; this build expects" "$work/digest.log" &&
   ! grep -q "^step 1" "$work/digest.log"'
[ $fail = 0 ] || tail -n 5 "$work"/*.log
exit $fail
