# script_testing: the preamble the shell tests share, sourced after their
# header comment: `check NAME CONDITION` prints ok/FAIL and sets fail=1 on a
# failure, $work is a fresh directory removed at exit, $py is the Python
# with torch and numpy, and lavapipe uses 2 threads unless told otherwise.
set -u
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fail=1; fi; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LP_NUM_THREADS=${LP_NUM_THREADS:-2}
py=/usr/bin/python3
