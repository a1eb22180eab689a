#!/usr/bin/env bash
# bench_data: MB/s of the data pipeline (read, tokenize, split documents,
# build the sequence list, fill every batch of one epoch) on a generated
# 100 MB text corpus, through `vktrain train --data-only`. The corpus lives
# in a temporary directory and is removed afterwards. Target: >= 50 MB/s.
#   scripts/bench_data.sh [BUILD_DIR] [SIZE_MB]      (defaults: build 100)
set -euo pipefail
build=${1:-build}
size_mb=${2:-100}
vktrain="$build/vktrain"
[ -x "$vktrain" ] || { echo "bench_data: no $vktrain; build first" >&2; exit 1; }
tmp=$(mktemp -d /tmp/vktrain_bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

python3 - "$tmp/corpus" "$size_mb" <<'PY'
import os, random, sys
out, size_mb = sys.argv[1], int(sys.argv[2])
os.makedirs(out)
rng = random.Random(1)
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randrange(1, 10)))
         for _ in range(5000)]
def block():
    docs = []
    size = 0
    while size < 1 << 20:
        lines = [" ".join(rng.choices(words, k=rng.randrange(3, 14))) for _ in range(rng.randrange(1, 6))]
        doc = "\n".join(lines) + "\n%\n"
        docs.append(doc)
        size += len(doc)
    return "".join(docs)
blocks = [block() for _ in range(8)]
for f in range(10):
    with open(os.path.join(out, "part%02d.txt" % f), "w") as fh:
        for i in range(size_mb // 10):
            fh.write(blocks[(f * 7 + i) % len(blocks)])
PY

cat > "$tmp/bench.yaml" <<YAML
output_dir: $tmp/out
model: {dim: 64, n_layers: 1, n_heads: 4, max_seq_len: 256}
dataset: {type: text, path: $tmp/corpus, separator: "%", packed: true}
batch_size: 16
YAML
"$vktrain" train --config "$tmp/bench.yaml" --data-only
