#!/usr/bin/env bash
# Installs what is missing, builds, and trains the default recipe
# (configs/default.yaml: a small byte-level llama on Debian's fortunes).
# Extra arguments are recipe overrides, e.g. max_steps=50.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh train
scripts/build.sh
build/vktrain devices
build/vktrain train --config configs/default.yaml "$@"
