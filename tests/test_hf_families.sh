# test_hf_families: parity with Hugging Face transformers' own modeling code
# for the families that transformers 4.44.2 (test_hf_transformers' oracle,
# over Debian 12's torch 1.13) does not have: Qwen3. Their oracle is a
# newer transformers over Debian unstable's python3-torch, in the tree of
# scripts/sid.sh (scripts/deps.sh test installs it: sid.sh torch);
# tests/hf_families_parity.py says what is checked. Without the tree the
# test fails, naming the command.
set -u
"$SRC/scripts/sid.sh" python -c 'import transformers' 2>/dev/null ||
  { echo "FAIL: no transformers in the Debian unstable tree: run scripts/deps.sh test (scripts/sid.sh torch)"; exit 1; }
export LP_NUM_THREADS=${LP_NUM_THREADS:-2}
exec /usr/bin/python3 "$SRC/tests/hf_families_parity.py"
