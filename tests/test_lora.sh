# test_lora: LoRA parity with PEFT on transformers (tests/lora_parity.py
# says what is checked and why). Its oracle, peft==0.12.0 and
# transformers==4.44.2, comes from PyPI into a venv over Debian's Python and
# torch that scripts/deps.sh test makes: $VKTRAIN_VENV, else
# ~/.cache/vktrain-venv. Without it the test fails, naming the command.
set -u
venv=${VKTRAIN_VENV:-$HOME/.cache/vktrain-venv}
if ! "$venv/bin/python" -c 'import peft, transformers' 2>/dev/null; then
  echo "FAIL: no peft or transformers in $venv: run scripts/deps.sh test (it makes the venv)"
  exit 1
fi
export LP_NUM_THREADS=${LP_NUM_THREADS:-2} HF_HUB_OFFLINE=1
exec "$venv/bin/python" "$SRC/tests/lora_parity.py"
