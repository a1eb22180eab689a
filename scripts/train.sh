#!/usr/bin/env bash
# Installs what is missing, builds, and trains the default recipe
# (configs/default.yaml: a small byte-level llama on Debian's fortunes).
# Extra arguments are recipe overrides, e.g. max_steps=50.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh train
scripts/build.sh
build/vktrain devices
# Until the training loop lands (issue 5), check the recipe and load its data.
build/vktrain train --config configs/default.yaml --data-only "$@"
echo
echo "vktrain: the recipe and its data load, but the training loop is not implemented yet"
echo "(issue 5): nothing was trained. See README.md, Status."
