#!/usr/bin/env bash
# Configures and builds vktrain into build/ (Release). Extra arguments go to
# cmake's configure step, e.g. -DVKTRAIN_WERROR=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
