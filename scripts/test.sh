#!/usr/bin/env bash
# Installs what is missing, builds with warnings as errors, and runs every
# test with ctest. The run has the Khronos validation layer on
# (VKTRAIN_VALIDATE=1): any validation message fails the test that caused
# it. VKTRAIN_TEST_VALIDATE=0 runs without it. Extra arguments go to ctest
# (e.g. -R ops).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
# The Hugging Face tokenizer test's oracle is the `tokenizers` package,
# which Debian does not ship: from PyPI, once.
/usr/bin/python3 -c 'import tokenizers' 2>/dev/null ||
  /usr/bin/python3 -m pip install --quiet --break-system-packages --root-user-action=ignore tokenizers
scripts/build.sh -DVKTRAIN_WERROR=ON
export VKTRAIN_VALIDATE="${VKTRAIN_TEST_VALIDATE:-1}"
# lavapipe: the tests are small; two threads per process is what we have.
export LP_NUM_THREADS="${LP_NUM_THREADS:-2}"
if [ $# -eq 0 ]; then
  # The PyTorch parity test's per-tensor errors, shown (ctest hides the
  # output of passing tests); the whole suite, this test included, follows.
  ctest --test-dir build -R '^test_parity_torch$' -V | grep -E '^[0-9]+: ' | sed 's/^[0-9]*: //' |
    sed -n '/^Test timeout/,$p' | tail -n +2 || true # a failure shows in the full run below
fi
ctest --test-dir build --output-on-failure "$@"
