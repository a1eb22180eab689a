# test_hf_transformers: parity with Hugging Face transformers itself
# (tests/hf_transformers_parity.py says what is checked and why). Its oracle,
# transformers==4.44.2, comes from PyPI into a venv over Debian's Python and
# torch that scripts/deps.sh test makes: $VKTRAIN_VENV, else
# ~/.cache/vktrain-venv. Without it the test fails, naming the command.
set -u
venv=${VKTRAIN_VENV:-$HOME/.cache/vktrain-venv}
if ! "$venv/bin/python" -c 'import transformers' 2>/dev/null; then
  echo "FAIL: no transformers in $venv: run scripts/deps.sh test (it makes the venv)"
  exit 1
fi
export LP_NUM_THREADS=${LP_NUM_THREADS:-2}
exec "$venv/bin/python" "$SRC/tests/hf_transformers_parity.py"
