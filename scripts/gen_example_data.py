#!/usr/bin/env python3
"""Generate the example data of configs/sft_example.yaml and
configs/tokens_example.yaml (stdlib only, deterministic, no copied text).

    python3 scripts/gen_example_data.py [OUTDIR]    # default: data/examples

sft.jsonl / sft_val.jsonl: arithmetic questions with their answers, in both
line forms ({"prompt", "response"} and {"messages": [...]}).
tokens_train_000.bin, tokens_train_001.bin, tokens_val_000.bin: llm.c token
shards (256 int32 header: magic 20240520, version 1, count; then uint16
tokens) of synthetic counting sentences, byte-tokenized (ids < 259) so a
byte-vocab model trains on them.
"""
import json
import os
import random
import struct
import sys

BOS, EOS = 256, 257
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def spell(n):
    return " ".join(WORDS[int(d)] for d in str(n))


def sft_line(rng):
    a, b = rng.randrange(100), rng.randrange(100)
    op = rng.choice(["plus", "minus", "times"])
    value = a + b if op == "plus" else a - b if op == "minus" else a * b
    question = f"What is {a} {op} {b}?"
    answer = f"{a} {op} {b} is {value} ({spell(value) if value >= 0 else 'minus ' + spell(-value)})."
    if rng.random() < 0.5:
        return {"prompt": question + "\n", "response": answer}
    return {"messages": [
        {"role": "system", "content": "You answer arithmetic questions."},
        {"role": "user", "content": question},
        {"role": "assistant", "content": answer},
    ]}


def write_jsonl(path, n, rng):
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            f.write(json.dumps(sft_line(rng)) + "\n")


def sentence_tokens(rng):
    start, step = rng.randrange(50), rng.randrange(1, 8)
    text = "count by %d from %d: %s." % (step, start, ", ".join(str(start + i * step) for i in range(rng.randrange(4, 12))))
    return [BOS] + list(text.encode("ascii")) + [EOS]


def write_shard(path, n_sentences, rng):
    tokens = []
    for _ in range(n_sentences):
        tokens += sentence_tokens(rng)
    header = [20240520, 1, len(tokens)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join("data", "examples")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(20240520)
    write_jsonl(os.path.join(out, "sft.jsonl"), 4000, rng)
    write_jsonl(os.path.join(out, "sft_val.jsonl"), 200, rng)
    write_shard(os.path.join(out, "tokens_train_000.bin"), 3000, rng)
    write_shard(os.path.join(out, "tokens_train_001.bin"), 3000, rng)
    write_shard(os.path.join(out, "tokens_val_000.bin"), 300, rng)
    print("wrote example data to", out)


if __name__ == "__main__":
    main()
