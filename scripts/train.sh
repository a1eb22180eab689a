#!/usr/bin/env bash
# Installs what is missing, builds, and trains the default recipe
# (configs/default.yaml: a small byte-level llama on Debian's fortunes),
# then plots the metrics and prints a sample from the trained model.
# Extra arguments are recipe overrides, e.g. max_steps=50. Running it again
# starts the demo over (overwrite=true) unless the arguments say resume=true
# (continue the earlier run) or overwrite= themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh train
scripts/build.sh
build/vktrain devices
case " $* " in
*" resume="* | *" overwrite="*) ;;
*) set -- "$@" overwrite=true ;;
esac
out=$(build/vktrain train --config configs/default.yaml --print-config "$@" | sed -n 's/^output_dir: *//p' | tr -d '"')
build/vktrain train --config configs/default.yaml "$@"
/usr/bin/python3 scripts/plot_metrics.py "$out"
echo
echo "sample (vktrain generate --model $out --prompt 'Q: ' --temperature 0.8 --top-k 40 --seed 1):"
build/vktrain generate --model "$out" --prompt "Q: " --max-new-tokens 200 --temperature 0.8 --top-k 40 --seed 1
echo
echo "outputs in $out: model.safetensors + config.json (Hugging Face), metrics.jsonl, metrics.png, checkpoints/"
