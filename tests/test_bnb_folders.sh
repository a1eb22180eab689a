# test_bnb_folders: LoRA over bitsandbytes 4-bit folders (NF4 and FP4, with
# and without double quantization) against bitsandbytes' own
# dequantization, PyTorch's loss over those weights and PEFT over the
# folder with vktrain's adapter; their oracle runs
# in the Debian unstable tree of scripts/sid.sh (bitsandbytes needs a newer
# torch than Debian 12's; scripts/deps.sh test installs it: sid.sh torch).
# tests/bnb_parity.py says what is checked. Without the tree the test
# fails, naming the command.
set -u
"$SRC/scripts/sid.sh" python -c 'import bitsandbytes, accelerate, peft' 2>/dev/null ||
  { echo "FAIL: no bitsandbytes in the Debian unstable tree: run scripts/deps.sh test (scripts/sid.sh torch)"; exit 1; }
export LP_NUM_THREADS=${LP_NUM_THREADS:-2}
exec /usr/bin/python3 "$SRC/tests/bnb_parity.py"
