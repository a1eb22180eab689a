"""What the parity scripts share: a token shard in llm.c's uint16 format
(256 int32 header: magic 20240520, version 1, token count; then the ids),
the format vktrain's tokens dataset reads; and the short fine-tuning run
of the Hugging Face parity tests."""
import json
import os
import subprocess

import numpy as np


def write_shard(path, ids):
    header = np.zeros(256, np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(ids)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(ids, np.uint16).tobytes())


def fine_tune(vktrain, work, name, src, out, stream, val, T, batch, steps):
    """`vktrain train` from the folder src into out: the token streams
    stream and val as shards in work, windows of T + 1 every T tokens,
    batch = the whole training set, AdamW at lr 1e-2 (constant, weight
    decay 0.1, clipping at 1), steps steps, shuffle off, evaluation after
    the last. Returns the metrics rows, or None after printing the run's
    output where it failed."""
    write_shard(os.path.join(work, name + "-train.bin"), stream)
    write_shard(os.path.join(work, name + "-val.bin"), val)
    recipe = os.path.join(work, name + ".yaml")
    with open(recipe, "w") as f:
        f.write(f"""output_dir: {out}
model: {{init_from: {src}, max_seq_len: {T}}}
dataset: {{type: tokens, path: {work}/{name}-train.bin, val_path: {work}/{name}-val.bin, shuffle: false}}
batch_size: {batch}
max_steps: {steps}
eval_every_n_steps: {steps}
optimizer: {{lr: 1.0e-2, weight_decay: 0.1}}
lr_scheduler: {{type: constant}}
clip_grad_norm: 1.0
""")
    r = subprocess.run([vktrain, "train", "--config", recipe], capture_output=True, text=True)
    if r.returncode:
        print(r.stdout[-3000:], r.stderr[-3000:])
        return None
    return [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
