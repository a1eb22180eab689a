#!/usr/bin/env bash
# Forward+backward tokens/s of a small llama (the default recipe's shape)
# on the chosen Vulkan device. Arguments: [batch [seq [dim [layers]]]].
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
scripts/build.sh >/dev/null
build/bench/bench_model "$@"
