# test_chat_template: sft_jsonl conversations and `vktrain generate --chat`
# against transformers' apply_chat_template (tests/chat_template_parity.py
# says what is checked). Its oracle, transformers==4.44.2, comes from PyPI
# into the venv over Debian's Python that scripts/deps.sh test makes:
# $VKTRAIN_VENV, else ~/.cache/vktrain-venv; Jinja is Debian's python3-jinja2.
# Without them the test fails, naming the command.
set -u
venv=${VKTRAIN_VENV:-$HOME/.cache/vktrain-venv}
if ! "$venv/bin/python" -c 'import transformers, jinja2' 2>/dev/null; then
  echo "FAIL: no transformers or jinja2 in $venv: run scripts/deps.sh test (it makes the venv)"
  exit 1
fi
export LP_NUM_THREADS=${LP_NUM_THREADS:-2}
exec "$venv/bin/python" "$SRC/tests/chat_template_parity.py"
