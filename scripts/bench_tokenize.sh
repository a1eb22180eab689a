#!/usr/bin/env bash
# bench_tokenize: encoding speed of `vktrain tokenize` for the hf tokenizer
# kinds, against Hugging Face `tokenizers` (one thread, encode_batch) on the
# same text in the same run. The text: the fortunes, the licenses and
# Python's standard library sources on this machine plus generated accented,
# CJK and emoji text, repeated to SIZE_MB. The tokenizers (32000 ids;
# GPT-2, Llama 3 and Qwen2 byte-level kinds, a Llama 2 SentencePiece kind)
# are trained here on the first 4 MB with `tokenizers` (PyPI; scripts/test.sh
# installs it). Target: >= 5 MB/s for every kind. The files live in a
# temporary directory, removed afterwards.
#   scripts/bench_tokenize.sh [BUILD_DIR] [SIZE_MB]      (defaults: build 32)
set -euo pipefail
build=${1:-build}
size_mb=${2:-32}
vktrain="$build/vktrain"
[ -x "$vktrain" ] || { echo "bench_tokenize: no $vktrain; build first" >&2; exit 1; }
/usr/bin/python3 -c 'import tokenizers' 2>/dev/null ||
  { echo "bench_tokenize: needs the Python package tokenizers (pip install tokenizers)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/vktrain_bench_tok.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

RAYON_NUM_THREADS=1 /usr/bin/python3 - "$tmp" "$size_mb" "$vktrain" <<'PY'
import glob, json, os, random, subprocess, sys, time
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
tmp, size_mb, vktrain = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def read(paths, limit):
    out, n = [], 0
    for p in sorted(paths):
        try:
            t = open(p, encoding="utf-8").read()
        except (OSError, UnicodeDecodeError):
            continue
        out.append(t)
        n += len(t)
        if n > limit:
            break
    return out

rng = random.Random(1)
words = "café naïve résumé Straße 中文 测试 日本語のテキスト 한국어 Привет мир Ελληνικά 😀 👍🏽 2024 3.14".split()
docs = read([p for p in glob.glob("/usr/share/games/fortunes/*") if not p.endswith((".dat", ".u8"))], 3 << 20)
docs += read(glob.glob("/usr/share/common-licenses/*"), 1 << 20)
docs += read(glob.glob("/usr/lib/python3*/*.py"), 3 << 20)
docs += [" ".join(rng.choice(words) for _ in range(200)) for _ in range(500)]
rng.shuffle(docs)
text = "\n%\n".join(docs)
corpus = os.path.join(tmp, "corpus.txt")
with open(corpus, "w", encoding="utf-8") as f:
    while f.tell() < size_mb << 20:
        f.write(text + "\n%\n")
size = os.path.getsize(corpus)
train_text = text[: 4 << 20].split("\n")

def byte_level(pre, norm=None):
    t = Tokenizer(models.BPE())
    if norm:
        t.normalizer = norm
    t.pre_tokenizer = pre
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(train_text, trainers.BpeTrainer(
        vocab_size=32000, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    return t

L3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
      r"\s*[\r\n]+|\s+(?!\S)|\s+")
kinds = {
    "gpt2": byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False)),
    "llama3": byte_level(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(L3), behavior="isolated"),
                                                  pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                           use_regex=False)])),
    "qwen2": byte_level(pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(L3.replace("{1,3}", "")),
                                                                      behavior="isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                          use_regex=False)]),
                        normalizers.NFC()),
}
sp = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
sp.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
sp.pre_tokenizer = pre_tokenizers.Metaspace()  # for training only: split at words
sp.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                decoders.Strip(" ", 1, 0)])
sp.train_from_iterator(train_text, trainers.BpeTrainer(
    vocab_size=32000, special_tokens=["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)],
    limit_alphabet=1000, show_progress=False))
j = json.loads(sp.to_str())
j["pre_tokenizer"] = None
j["added_tokens"] = [a for a in j["added_tokens"] if not a["content"].startswith("<0x")]
kinds["llama2"] = Tokenizer.from_str(json.dumps(j))

docs = open(corpus, encoding="utf-8").read().split("\n%\n")
print(f"bench_tokenize: {size / 1e6:.1f} MB of text, {len(docs)} documents")
print(f"{'kind':8} {'vktrain MB/s':>13} {'tokenizers MB/s':>16} {'ratio':>7}   tokens")
worst = None
for name, tok in kinds.items():
    d = os.path.join(tmp, name)
    os.makedirs(d)
    tok.save(os.path.join(d, "tokenizer.json"))
    t0 = time.perf_counter()
    r = subprocess.run([vktrain, "tokenize", "--tokenizer", d, "--input", corpus, "--output",
                        os.path.join(tmp, name + ".bin"), "--separator", "%"], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode:
        sys.exit(f"bench_tokenize: {name}: {r.stderr}")
    ours = float(r.stdout.split()[-2])  # the MB/s of the summary line (tokenizing and writing)
    t0 = time.perf_counter()
    n = sum(len(e.ids) for e in tok.encode_batch(docs, add_special_tokens=False))
    ref = size / 1e6 / (time.perf_counter() - t0)
    print(f"{name:8} {ours:13.1f} {ref:16.1f} {ours / ref:7.2f}   {n} (vktrain run {wall:.1f} s with loading)")
    worst = ours if worst is None else min(worst, ours)
print(f"bench_tokenize: slowest kind {worst:.1f} MB/s (target >= 5 MB/s): {'ok' if worst >= 5 else 'BELOW TARGET'}")
PY
