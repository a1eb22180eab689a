"""bnb_parity: LoRA over a bitsandbytes 4-bit folder (model.init_from a
folder transformers saved with BitsAndBytesConfig(load_in_4bit=True)),
against bitsandbytes itself, run by test_bnb_folders.sh.

The oracle, tests/hf_oracle.py's bnb_build and peft_compare, runs inside
the Debian unstable tree of scripts/sid.sh (its python3-torch and sid.sh's
pins: transformers 4.57.1, bitsandbytes 0.50.2 on the CPU, PEFT 0.17.1): it makes a tiny random model,
has transformers quantize and save it, loads the folder back and writes
bitsandbytes' own dequantization of each 4-bit weight. Per case (llama and
gpt2; NF4 and FP4; with and without double quantization; quantized from
float32, bfloat16 and float16, the dtype the weights dequantize to):
  values:   vktrain's merged folder (lora.merge_on_save) holds, for every
            layer matrix without an adapter, bitsandbytes' dequantized
            weight bit for bit (equal floats), so the 4-bit tensors were
            read as bitsandbytes reads them (one case sharded, a weight's
            absmax, state and code moved to shards before and after its
            own: a shard boundary inside a weight's tensors);
  loss:     vktrain's step-1 loss (the adapters' B is 0, so the base's)
            equals transformers' loss of the full-precision source with
            bitsandbytes' dequantized weights and the folder's other
            parameters in place, on the same windows,
            |vk - hf| / hf < 1e-5 (float32 on both sides, sums in other
            orders). Not transformers' forward of the 4-bit folder itself:
            on the CPU bitsandbytes repacks the weights to bf16 at the first
            forward and its products are off by some 1e-4;
  control:  the full-precision source's loss differs by > 1e-4 (the
            quantization is not a no-op), so the check above has teeth;
  files:    the merged folder's config.json has no quantization_config;
  PEFT:     PEFT 0.17.1 with vktrain's adapter folder over the
            full-precision source with bitsandbytes' dequantized weights
            gives the merged folder's logits within 1e-4 of the largest
            (100x closer than without the adapter); over the 4-bit folder
            itself (transformers' Linear4bit layers) the adapter loads and
            the logits come within twice the distance of bitsandbytes' CPU
            forward from its own dequantized weights (it repacks them to
            bf16 at the first forward: some 1e-2 of the largest logit);
  generate: (the first case) `vktrain generate --temperature 0` from the
            4-bit folder prints what it prints from a full-precision folder
            of bitsandbytes' dequantized weights, byte for byte (the 4-bit
            kernels give the fp32 kernels' bits on those values).
Then the errors: such a folder without a lora section, and one with a
tensor of a weight's quantization state removed, are refused by name."""
import json
import os
import random
import struct
import subprocess
import sys

import numpy as np

from shard_testing import write_shard
from sid_oracle import Oracle, check, failures, tree_root

VKTRAIN = os.environ["VKTRAIN"]
T, WINDOWS = 16, 8
# (arch, quant_type, double_quant, dtype)
CASES = [("llama", "nf4", True, "bfloat16"), ("llama", "fp4", False, "float16"), ("llama", "nf4", False, "float32"),
         ("gpt2", "nf4", False, "bfloat16"), ("gpt2", "fp4", True, "float32")]
UNADAPTED = {"llama": ("self_attn.k_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"),
             "gpt2": ("attn.c_proj", "mlp.c_fc", "mlp.c_proj")}


def st_raw(path):
    """A safetensors file's tensors: {name: (dtype, shape, bytes)}, in file order."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header, data = json.loads(f.read(n)), f.read()
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])}


def st_load(path):
    """A safetensors file's F32 tensors as numpy arrays."""
    out = {}
    for k, (dtype, shape, data) in st_raw(path).items():
        assert dtype == "F32", (k, dtype)
        out[k] = np.frombuffer(data, np.float32).reshape(shape)
    return out


def st_write_raw(path, tensors):
    header, at = {"__metadata__": {"format": "pt"}}, 0
    for k, (dtype, shape, data) in tensors.items():
        header[k] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(data)]}
        at += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(t[2] for t in tensors.values()))


def st_drop(path, name):
    """Rewrites the safetensors file without tensor name."""
    tensors = st_raw(path)
    del tensors[name]
    st_write_raw(path, tensors)


def st_move(folder, names, to):
    """Moves tensors of a sharded folder into its shard file `to` (its index updated): a
    weight apart from parts of its state, which transformers itself keeps together."""
    index_path = os.path.join(folder, "model.safetensors.index.json")
    index = json.load(open(index_path))
    for name in names:
        src = index["weight_map"][name]
        a, b = st_raw(os.path.join(folder, src)), st_raw(os.path.join(folder, to))
        b[name] = a.pop(name)
        st_write_raw(os.path.join(folder, src), a)
        st_write_raw(os.path.join(folder, to), b)
        index["weight_map"][name] = to
    json.dump(index, open(index_path, "w"))


def split_states(folder):
    """Whether some 4-bit weight of a sharded folder has a part of its state in another file."""
    files = json.load(open(os.path.join(folder, "model.safetensors.index.json")))["weight_map"]
    return any(files.get(k + ".weight") not in (None, f) for k, f in
               ((name.split(".weight.")[0], f) for name, f in files.items() if ".weight." in name))


def recipe(work, name, src, out, extra=""):
    path = os.path.join(work, name + ".yaml")
    with open(path, "w") as f:
        f.write(f"""output_dir: {out}
model: {{init_from: {src}, max_seq_len: {T}}}
dataset: {{type: tokens, path: {work}/{name}-train.bin, shuffle: false}}
batch_size: {WINDOWS}
max_steps: 2
optimizer: {{lr: 1.0e-2}}
lr_scheduler: {{type: constant}}
{extra}""")
    return path


def run_case(oracle, i, arch, qt, dq, dtype):
    tag = f"{arch} {qt}{' double-quant' if dq else ''} from {dtype}"
    name = f"{arch}-{qt}-{int(dq)}-{dtype}"
    src_in, (dst, dst_in) = oracle.path(name + "-src")[1], oracle.path(name + "-bnb")
    deq, deq_in = oracle.path(name + "-dequant.safetensors")
    rng = random.Random(100 + i)
    stream = [rng.randrange(300) for _ in range(WINDOWS * T + 1)]
    windows = [stream[k * T:k * T + T + 1] for k in range(WINDOWS)]
    plain, plain_in = oracle.path(name + "-plain")
    build = {"op": "bnb_build", "arch": arch, "src": src_in, "dst": dst_in, "dequant": deq_in, "quant_type": qt,
             "double_quant": dq, "dtype": dtype, "seed": 40 + i}
    if i == 0:
        build["plain"] = plain_in
    if i == 1:  # shards of a few modules
        build["max_shard_size"] = "40KB"
    built, hf_bnb, hf_src = oracle.ask([
        build,
        {"op": "loss", "dir": src_in, "windows": windows, "weights": deq_in},
        {"op": "loss", "dir": src_in, "windows": windows}])
    if i == 0:
        print(f"bitsandbytes {built['bitsandbytes']}, transformers {built['transformers']}, torch {built['torch']}")
    write_shard(os.path.join(oracle.host, name + "-train.bin"), stream)
    out = os.path.join(oracle.host, name + "-out")
    cfg = recipe(oracle.host, name, dst, out, "lora: {rank: 4, alpha: 8, merge_on_save: true}\n")
    r = subprocess.run([VKTRAIN, "train", "--config", cfg], capture_output=True, text=True)
    if r.returncode:
        print(r.stdout[-3000:], r.stderr[-3000:])
        check(f"{tag}: vktrain trains LoRA over the folder", False)
        return
    if i == 1:  # a weight's state before it and after it in other files
        shards = sorted(f for f in os.listdir(dst) if f.endswith(".safetensors"))
        w = "model.layers.0.mlp.up_proj.weight"
        st_move(dst, [w + ".absmax", w + ".quant_state.bitsandbytes__fp4"], shards[0])
        st_move(dst, [w + ".quant_map"], shards[-1])
        check(f"{tag}: the folder is sharded, a weight apart from parts of its state", len(shards) > 3 and
              split_states(dst), f"{len(shards)} shards")
    check(f"{tag}: vktrain reads the 4-bit weights as stored",
          f"as the folder stores them: bitsandbytes {qt.upper()}" in r.stdout, r.stdout[:600])
    metrics = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    vk0 = next(m["loss"] for m in metrics if m["step"] == 1)
    rel = abs(vk0 - hf_bnb) / hf_bnb
    check(f"{tag}: step-1 loss equals PyTorch's over bitsandbytes' dequantized weights", rel < 1e-5,
          f"vk {vk0:.8f} hf {hf_bnb:.8f} rel {rel:.2e}")
    rel = abs(vk0 - hf_src) / hf_bnb
    check(f"{tag}: control: the full-precision source's loss differs by > 10x the tolerance", rel > 1e-4,
          f"rel {rel:.2e}")
    want, merged = st_load(deq), st_load(os.path.join(out, "merged", "model.safetensors"))
    prefix = "model.layers" if arch == "llama" else "transformer.h"
    names = [f"{prefix}.{layer}.{mod}.weight" for layer in range(2) for mod in UNADAPTED[arch]]
    worst = []
    for n in names:
        have = merged.get(n, merged.get(n[len("transformer."):]))
        if have is None:
            worst.append(f"{n} missing")
            continue
        have = have if arch == "llama" else have.T  # Conv1D (in, out)
        if have.shape != want[n].shape or not np.array_equal(have, want[n]):
            worst.append(f"{n}: {np.count_nonzero(have != want[n]) if have.shape == want[n].shape else 'shape'}")
    check(f"{tag}: {len(names)} unadapted matrices of the merged folder are bitsandbytes' dequantized weights, "
          f"bit for bit", not worst and built["n"] == len(names) + 2 * (1 + (arch == "llama")), "; ".join(worst[:4]))
    if i == 0:
        gen = [subprocess.run([VKTRAIN, "generate", "--model", d, "--prompt", "the quick brown", "--temperature", "0",
                               "--max-new-tokens", "12"], capture_output=True) for d in (dst, plain)]
        check(f"{tag}: vktrain generate from the 4-bit folder prints what it prints from a full-precision folder of "
              f"bitsandbytes' dequantized weights", gen[0].returncode == 0 and gen[0].stdout == gen[1].stdout and
              len(gen[0].stdout) > len("the quick brown\n"), f"{gen[0].stdout!r} {gen[1].stdout!r} "
              f"{gen[0].stderr[-300:]!r}")
    out_in = oracle.path(name + "-out")[1]
    pc = oracle.ask([{"op": "peft_compare", "base": dst_in, "src": src_in, "dequant": deq_in, "adapter": out_in,
                      "merged": out_in + "/merged", "windows": [w[:T] for w in windows]}])[0]
    check(f"{tag}: PEFT {pc['peft']} with vktrain's adapter over bitsandbytes' dequantized base gives vktrain's "
          f"merged folder's logits", pc["diff"] < 1e-4 * pc["scale"] and pc["control"] > 100 * pc["diff"],
          f"max |diff| {pc['diff']:.2e}, max |logit| {pc['scale']:.2f}, without the adapter {pc['control']:.2e}")
    check(f"{tag}: PEFT with the adapter over the 4-bit folder itself (Linear4bit) gives them as closely as "
          f"bitsandbytes' CPU forward gives its own dequantized base's", pc["diff_4bit"] < 2 * pc["noise_4bit"] +
          1e-4 * pc["scale"], f"max |diff| {pc['diff_4bit']:.2e}, the 4-bit forward's own {pc['noise_4bit']:.2e}")
    cfg_out = json.load(open(os.path.join(out, "merged", "config.json")))
    check(f"{tag}: the merged folder is full precision (no quantization_config)", "quantization_config" not in cfg_out)
    return dst, name


def run_errors(oracle, dst, name):
    out = os.path.join(oracle.host, name + "-err")
    r = subprocess.run([VKTRAIN, "train", "--config", recipe(oracle.host, name, dst, out)], capture_output=True,
                       text=True)
    check("a bitsandbytes folder without a lora section is refused, naming the fix",
          r.returncode != 0 and "add a lora section" in r.stderr, r.stderr.strip()[-300:])
    broken = os.path.join(oracle.host, name + "-broken")
    subprocess.run(["cp", "-r", dst, broken], check=True)
    gone = "model.layers.1.mlp.up_proj.weight.absmax"
    st_drop(os.path.join(broken, "model.safetensors"), gone)
    r = subprocess.run([VKTRAIN, "train", "--config",
                        recipe(oracle.host, name, broken, out, "lora: {rank: 4, alpha: 8}\n")],
                       capture_output=True, text=True)
    check("a folder missing a weight's absmax is refused, naming the tensor",
          r.returncode != 0 and f"'{gone}' is missing" in r.stderr and not os.path.exists(os.path.join(out, "final")),
          r.stderr.strip()[-300:])


def main():
    oracle = Oracle(tree_root())
    try:
        first = None
        for i, case in enumerate(CASES):
            got = run_case(oracle, i, *case)
            first = first or got
        if first:
            run_errors(oracle, *first)
    finally:
        oracle.close()
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print(f"{len(CASES)} bitsandbytes folders: every check passed")


main()
