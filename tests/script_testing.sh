# script_testing: what the script tests share, sourced at their top:
# `check NAME CONDITION` (prints ok or FAIL; a failure sets fail=1, the
# script's exit status), a scratch directory $work removed at exit, and two
# lavapipe threads unless LP_NUM_THREADS says otherwise.
set -u
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LP_NUM_THREADS=${LP_NUM_THREADS:-2}
