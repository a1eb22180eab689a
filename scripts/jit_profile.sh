#!/usr/bin/env bash
# Where a kernel's time goes on lavapipe, instruction by instruction.
# llvmpipe compiles each shader to machine code at run time, so perf sees
# its samples in anonymous memory with no symbols. This script runs a
# command, samples its user-space cycles with perf once the shaders are
# compiled, copies the JIT code out of the process with gdb, disassembles
# it with objdump and prints:
#   - each JIT function's share of the samples (a function runs from the
#     instruction after a `ret` to the next `ret`; the big one is the
#     shader's body, the small ones llvmpipe's texel-fetch and image
#     helpers, with their call sites in the code: a texel view fetched
#     at 20 sites is the operand a loop step fetches 20 times);
#   - the samples of the hottest functions by 4 KiB of code (a hot loop
#     and code run rarely but slowly, e.g. from a cold instruction cache);
#   - the hottest instructions with the code before them (a sample lands
#     just after an instruction that waited: the load before a hot
#     instruction is a cache miss).
# usage: scripts/jit_profile.sh [-w warmup_s] [-d seconds] [-n top] -- command [args...]
#   e.g. LP_NUM_THREADS=1 scripts/jit_profile.sh -- build/bench/bench_matmul 2048 352 128 3000 tnk 16
# The command must run for warmup + seconds (default 4 + 6); a benchmark
# with many repetitions of one kernel gives the clearest picture. Needs
# perf (Debian's linux-perf), gdb and objdump (binutils), and permission
# to trace the process (root, or kernel.yama.ptrace_scope 0 and
# kernel.perf_event_paranoid <= 2). The files stay in the directory it
# prints (the disassembly: jit.asm).
set -euo pipefail
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { print }' "$0" >&2; exit 2; }
warmup=4 seconds=6 top=12
while getopts "w:d:n:" opt; do
  case $opt in
    w) warmup=$OPTARG ;;
    d) seconds=$OPTARG ;;
    n) top=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift
[ $# -gt 0 ] || usage
for tool in perf gdb objdump; do
  command -v "$tool" >/dev/null || { echo "jit_profile: '$tool' is not installed (apt-get install linux-perf gdb binutils)" >&2; exit 1; }
done
dir=$(mktemp -d /tmp/jit_profile.XXXXXX)
"$@" > "$dir/command.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
sleep "$warmup"
kill -0 $pid 2>/dev/null || { echo "jit_profile: the command ended within the ${warmup} s warm-up:" >&2; tail -5 "$dir/command.log" >&2; exit 1; }
perf record -q -p $pid -o "$dir/perf.data" -F 4000 -- sleep "$seconds" > "$dir/perf.log" 2>&1 ||
  { echo "jit_profile: perf record failed:" >&2; tail -5 "$dir/perf.log" >&2; exit 1; }
# the JIT code: executable anonymous mappings (not [vdso] and the like)
: > "$dir/jit.asm"
while read -r range _ offset _ inode rest; do
  [ "$offset" = 00000000 ] && [ "$inode" = 0 ] && [ -z "$rest" ] || continue
  start=${range%-*} end=${range#*-}
  gdb -p $pid -batch -ex "dump memory $dir/jit_$start.bin 0x$start 0x$end" > /dev/null 2>&1 ||
    { echo "jit_profile: gdb could not read the process's memory (permission to trace it?)" >&2; exit 1; }
  objdump -D -b binary -m i386:x86-64 --adjust-vma=0x$start "$dir/jit_$start.bin" >> "$dir/jit.asm"
done < <(awk '$2 ~ /^r-xp/' /proc/$pid/maps)
kill $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
trap - EXIT
perf script -i "$dir/perf.data" -F ip 2>/dev/null | sort | uniq -c > "$dir/ips.txt"
/usr/bin/python3 - "$dir" "$top" <<'PY'
import bisect, re, sys
d, top = sys.argv[1], int(sys.argv[2])
lines, addrs, starts, new = [], [], [], True
for line in open(f"{d}/jit.asm"):
    m = re.match(r"\s*([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*(.*)", line)
    if not m:
        continue
    a, ins = int(m.group(1), 16), m.group(2).strip()
    lines.append(line.rstrip()), addrs.append(a)
    if new and ins and "nop" not in ins and not ins.startswith(("data16", "(bad)", "int3")):
        starts.append(a)
        new = False
    if ins.startswith("ret"):
        new = True
# Call sites per function: llvmpipe loads a helper's address into a
# register (movabs) and calls through it, often many times; a scan in
# code order credits each `call *%reg` to the last address loaded there.
# Newer Mesa (24 and later) calls its texel fetches through a table in
# memory (`call *0x120(%rax)`), whose targets are set at run time: those
# sites are counted apart, per operand, and not credited to a function.
calls, held, indirect = {}, {}, {}
for line in lines:
    m = re.search(r"movabs \$0x([0-9a-f]+),%(\w+)", line)
    if m:
        held[m.group(2)] = int(m.group(1), 16)
    m = re.search(r"call\s+\*%(\w+)$", line)
    if m and m.group(1) in held:
        calls[held[m.group(1)]] = calls.get(held[m.group(1)], 0) + 1
    m = re.search(r"call\s+\*(-?0x[0-9a-f]+)?\((%\w+)\)$", line)
    if m:
        key = f"{m.group(1) or ''}({m.group(2)})"
        indirect[key] = indirect.get(key, 0) + 1
samples, total = {}, 0
for line in open(f"{d}/ips.txt"):
    c, ip = line.split()
    samples[int(ip, 16)] = int(c)
    total += int(c)
if not total:
    sys.exit("jit_profile: perf took no samples")
def func(ip):
    i = bisect.bisect_right(starts, ip) - 1
    return starts[i] if i >= 0 and (i + 1 == len(starts) or ip < starts[i + 1]) else None
per = {}
for ip, c in samples.items():
    f = func(ip) if addrs and addrs[0] <= ip <= addrs[-1] else None
    per[f] = per.get(f, 0) + c
print(f"{total} samples; JIT code {len(addrs)} instructions in {len(starts)} functions ({d}/jit.asm)")
print("  share  samples  function      size  call sites")
ranked = sorted(per.items(), key=lambda x: -x[1])
for f, c in ranked[:top]:
    if f is None:
        print(f"{100.0 * c / total:6.1f}% {c:8d}  (outside the JIT code: the driver, the kernel, the command)")
        continue
    # its end: the next function, or the end of its run of code (the
    # dumps of several mappings follow one another with gaps between)
    i, j = starts.index(f), bisect.bisect_left(addrs, f)
    nxt = starts[i + 1] if i + 1 < len(starts) else None
    while j + 1 < len(addrs) and addrs[j + 1] - addrs[j] < 64 and (nxt is None or addrs[j + 1] < nxt):
        j += 1
    end = addrs[j + 1] if j + 1 < len(addrs) and addrs[j + 1] - addrs[j] < 64 else addrs[j] + 1
    print(f"{100.0 * c / total:6.1f}% {c:8d}  {f:#x}  {end - f:6d}  {calls.get(f, 0)}")
if indirect:
    print("calls through memory (targets set at run time, not in the column above): " +
          ", ".join(f"{n} x call *{k}" for k, n in sorted(indirect.items(), key=lambda x: -x[1])))
for f, c in ranked[:3]:
    if f is None:
        continue
    bins = {}
    for ip, n in samples.items():
        if func(ip) == f:
            bins[(ip - f) // 4096] = bins.get((ip - f) // 4096, 0) + n
    print(f"function {f:#x} by 4 KiB of code (offset KiB: share of its samples):")
    print("  " + "  ".join(f"{4 * b}: {100.0 * n / c:.0f}%" for b, n in sorted(bins.items())))
print("hottest instructions (each with the 6 before it; a sample lands after the instruction that waited):")
for ip, c in sorted(samples.items(), key=lambda x: -x[1])[:min(top, 5)]:
    i = bisect.bisect_left(addrs, ip)
    if i >= len(addrs) or addrs[i] != ip:
        continue
    print(f"{100.0 * c / total:5.1f}% at {ip:#x}")
    for line in lines[max(0, i - 6):i + 1]:
        print("   " + line)
PY
echo "files: $dir"
