#!/usr/bin/env bash
# Fuzzes the parsers of what users hand vktrain (recipes with overrides,
# sft_jsonl and token-shard datasets, safetensors, config.json,
# tokenizer.json) with libFuzzer. Builds the targets of tests/fuzz with
# clang, AddressSanitizer and UndefinedBehaviorSanitizer into build-fuzz/,
# runs each for SECONDS (default 60) from its working corpus
# (build-fuzz/corpus/<target>, kept between runs) and its kept inputs
# (tests/fuzz/<target>/), and prints per target the executions and what was
# found. A target stops at its first crash (a sanitizer report, a leak, an
# abort from a broken promise, vkt_fatal, a timeout or running out of
# memory); the input is copied into tests/fuzz/<target>/ as
# crash-|leak-|timeout-|oom-<sha1>, where test_fuzz_<target> replays it in
# scripts/test.sh until the bug is fixed, and keeps it as a regression test
# after. Exits 1 when anything was found.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (default: every target)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=60
if [[ ${1:-} =~ ^[0-9]+$ ]]; then
  secs=$1
  shift
fi
scripts/deps.sh fuzz
mkdir -p build-fuzz
if ! { CC=clang cmake -S . -B build-fuzz -DVKTRAIN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build build-fuzz -j"$(nproc)"; } >build-fuzz/build.log 2>&1; then
  tail -n 30 build-fuzz/build.log >&2
  echo "fuzz: the build failed (build-fuzz/build.log)" >&2
  exit 2
fi
if [ $# -eq 0 ]; then
  set -- $(cd build-fuzz/fuzz && ls fuzz_* | sed 's/^fuzz_//')
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
found=0
printf '%-12s %12s %10s %8s  %s\n' target executions exec/s corpus found
for t in "$@"; do
  bin=build-fuzz/fuzz/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz: no target '$t' (build-fuzz/fuzz has: $(ls build-fuzz/fuzz | tr '\n' ' '))" >&2; exit 2; }
  # Absolute paths: a target may change its working directory.
  corpus=$PWD/build-fuzz/corpus/$t art=$PWD/build-fuzz/artifacts/$t log=build-fuzz/fuzz_$t.log
  mkdir -p "$corpus" "$art"
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="$PWD/tests/fuzz/$t.dict")
  "$bin" "$corpus" "$PWD/tests/fuzz/$t" "${dict[@]}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$art/" >"$log" 2>&1 || true
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  news=()
  for f in "$art"/crash-* "$art"/leak-* "$art"/timeout-* "$art"/oom-*; do
    [ -e "$f" ] || continue
    # a kept input may be the one that crashed (a seed): name it, copy nothing
    same=$(cd "tests/fuzz/$t" && sha1sum -- * | awk -v h="$(sha1sum < "$f" | cut -c1-40)" '$1 == h {print $2; exit}')
    if [ -n "$same" ]; then
      news+=("tests/fuzz/$t/$same")
    else
      cp "$f" "tests/fuzz/$t/" && news+=("tests/fuzz/$t/$(basename "$f")")
    fi
    rm "$f"
  done
  printf '%-12s %12s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$(ls "$corpus" | wc -l)" \
    "${news[*]:-nothing}"
  if [ -z "$execs" ] && [ ${#news[@]} -eq 0 ]; then
    found=1
    echo "    fuzz_$t did not run: $(grep -m 1 -E 'ERROR|error' "$log" || tail -n 1 "$log")"
  elif [ ${#news[@]} -gt 0 ]; then
    found=1
    grep -E -m 3 'ERROR|runtime error|^fuzz: ' "$log" | sed 's/^/    /'
    echo "    (the whole report: $log)"
  fi
done
exit $found
