#!/usr/bin/env bash
# Matmul throughput of vktrain's three layouts, in both kernel families
# (texel: the CPU choice; tiled: the GPU one, forced), next to numpy
# (OpenBLAS sgemm) on the same shapes, in the same run.
# usage: scripts/bench_matmul.sh [M N K [reps]]   (FAMILIES="texel" for one)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh bench
scripts/build.sh >/dev/null
M=${1:-4096} N=${2:-768} K=${3:-768} R=${4:-5}
for family in ${FAMILIES:-texel tiled}; do
    VKTRAIN_KERNELS=$family build/bench/bench_matmul "$M" "$N" "$K" "$R"
done
# numpy from Debian; OPENBLAS_CORETYPE/L2_SIZE slow a current OpenBLAS, so
# they are unset for this command only.
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 - "$M" "$N" "$K" "$R" <<'PY'
import sys, time
import numpy as np
M, N, K, R = map(int, sys.argv[1:])
rng = np.random.default_rng(0)
X = rng.standard_normal((M, K), dtype=np.float32)
W = rng.standard_normal((N, K), dtype=np.float32)
dY = rng.standard_normal((M, N), dtype=np.float32)
cases = [("nt  Y = X.W^T ", lambda: X @ W.T), ("nn  dX = dY.W ", lambda: dY @ W), ("tn  dW += dY^T.X", lambda: dY.T @ X)]
for name, f in cases:
    f()
    t = time.perf_counter()
    for _ in range(R):
        f()
    dt = time.perf_counter() - t
    print(f"numpy         {name:18s} {2.0 * M * N * K * R / dt * 1e-9:8.2f} GFLOP/s")
PY
