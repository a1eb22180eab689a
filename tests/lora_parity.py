"""lora_parity: vktrain's LoRA against PEFT 0.12.0 on transformers 4.44.2,
run by test_lora.sh in the venv that
scripts/deps.sh test makes.

For a tiny llama (GQA 4/2, untied, q/k/v/o and MLP biases), a tiny gpt2
(Conv1D layers, tied) and a tiny phi3 (GQA 4/2, untied, fused qkv_proj and
gate_up_proj: one adapter each, as PEFT adapts them), transformers builds
a random base in float32 and PEFT wraps it with LoRA (r 4, alpha 8, every
linear layer: llama q/k/v/o/gate/up/down_proj, gpt2 c_attn, c_proj
(attention and MLP), c_fc, phi3 qkv_proj, o_proj, gate_up_proj, down_proj).
B is randomized too (PEFT starts it at zero, which would leave A's first
gradient zero and hide a wrong dA), and the adapter is saved with
save_pretrained. Both sides then start from the same base
(model.init_from) and adapter (lora.init_from) and take 4 AdamW steps on
the same 8 windows of 17 token ids (the whole training set as one global
batch, split W x A x B = 1 x 2 x 4 in vktrain, and 2 x 2 x 2 under
mpirun with dist.zero: 1; lr 1e-2 constant,
betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on the adapters, clip 1.0).
Checked:
  losses:   every step's loss, |vk - pt| / pt < 1e-5;
  adapters: vktrain's adapter_model.safetensors against PyTorch's after
            the 4 steps: per tensor, max |vk - pt| <= 2e-3 x max |pt - start|
            (float32 rounding carried through AdamW; the movement is at
            least 1e-3 so the bound cannot pass on an unchanged adapter);
  resume:   from step 2's checkpoint, the final adapter bit for bit;
  files:    adapter_config.json has r, lora_alpha, target_modules, and
            fan_in_fan_out for gpt2, base_model_name_or_path the base;
            the checkpoint holds the adapter and its AdamW state only;
  round trip: PeftModel.from_pretrained(base, vktrain's output) gives, on
            held-out windows, the logits transformers gives for vktrain's
            merged model (lora.merge_on_save: output_dir/merged), max |diff| < 1e-4 x max |logit|;
            and neither equals the base's logits (the adapter moved them).
bf16 base (llama): the base saved in bfloat16; PEFT trains over it loaded
as float32 (the bf16 values exactly), vktrain with model.base_dtype: bf16
(the frozen matrices stored in bf16 on the device): the same loss and
adapter checks, and PEFT over the bf16 base with vktrain's adapter gives
its merged model's logits (merged/ holds the base as loaded, bf16 values).
NF4 base (llama, gpt2; after the other cases): vktrain with
model.base_dtype: nf4 (the layers' matrices in NF4 on the device, the
embeddings bf16), with and without model.nf4_double_quant (the latter
2 x 2 x 2 with dist.zero); PEFT trains over the base as an independent
numpy port of bitsandbytes' quantization (nf4_dequantized) gives it: the
same loss and adapter checks, PEFT over that base with vktrain's adapter
gives vktrain's merged model's logits, and they differ from the fp32
base's (the quantization is not a no-op).
An adapter of another architecture is refused. The base staying bitwise unchanged, and LoRA with B = 0 giving the base's
logits bit for bit, are checked on the device by test_lora_model (C).
Dropout: with lora.dropout 0.1, PyTorch applies the
mask of a Python port of vktrain's counter-based hash (op_dropout.c: seed,
step, sample index in the global batch, position, layer, adapted layer,
feature) through a module put in place of PEFT's lora_dropout; the losses
and adapters must agree as above under 1 x 2 x 4 and 2 x 2 x 2 (the mask
does not depend on the split), the losses must differ from those without
dropout, a resume must give the same adapter bit for bit, and
adapter_config.json must hold lora_dropout 0.1."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import peft
import torch
import transformers

from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, Phi3Config

from shard_testing import write_shard

VKTRAIN = os.environ["VKTRAIN"]
T, WINDOWS, VAL_WINDOWS, STEPS, VOCAB, RANK, ALPHA = 16, 8, 4, 4, 320, 4, 8
SEED, DROPOUT = 5, 0.1
TARGETS = {"llama": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
           "gpt2": ["c_attn", "c_proj", "c_fc"],
           "phi3": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]}
failures = []


def check(name, ok, detail=""):
    print(("ok: " if ok else "FAIL: ") + name + (f"  ({detail})" if detail else ""))
    if not ok:
        failures.append(name)


def build_base(arch, d, gen):
    if arch == "llama":
        cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rope_theta=100.0,
                          tie_word_embeddings=False, attention_bias=True, mlp_bias=True)
    elif arch == "phi3":
        cfg = Phi3Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, rope_theta=100.0,
                         tie_word_embeddings=False, pad_token_id=0)
    else:
        cfg = GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=T)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen) * 0.1
            norm = p.dim() == 1 and ("norm" in name or ".ln_" in name) and name.endswith("weight")
            p.copy_(noise + 1.0 if norm else noise)
    model.save_pretrained(d)


def load_base(d):
    m = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager")
    m.eval()  # no dropout anywhere (the configs' dropouts are 0.1 by default for gpt2)
    return m


def make_adapter(arch, base_dir, d, gen):
    model = get_peft_model(load_base(base_dir), LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0,
                                                           target_modules=TARGETS[arch], task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
    model.save_pretrained(d)


def loss_of(model, x):
    logits = model(input_ids=x[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))


M32 = 0xFFFFFFFF


def hash32(v):
    """lowbias32, as op_dropout.c and shaders/common/lora_dropout.comp (v: int or uint64 array)."""
    v = v ^ (v >> 16)
    v = (v * 0x7FEB352D) & M32
    v = v ^ (v >> 15)
    v = (v * 0x846CA68B) & M32
    return v ^ (v >> 16)


def dropout_key(seed, step, stream):
    h = hash32(0x9E3779B9 ^ (seed & M32))
    for word in (seed >> 32, step & M32, step >> 32, stream):
        h = hash32(h ^ word)
    return h


# vktrain's slot of each adapted layer (enum lora_slot in src/model/model_internal.h)
# (phi3's fused qkv_proj and gate_up_proj: the slot of their first part, q and gate)
SLOTS = {"q_proj": 0, "k_proj": 1, "v_proj": 2, "c_attn": 3, "o_proj": 4, "attn.c_proj": 4, "gate_proj": 5,
         "up_proj": 6, "c_fc": 6, "down_proj": 7, "mlp.c_proj": 7, "qkv_proj": 0, "gate_up_proj": 5}
# vktrain holds a fused weight's B as one parameter per projection (its
# AdamW state is named so in checkpoints)
PARTS = {"qkv_proj.lora_B": ["q_proj.lora_B", "k_proj.lora_B", "v_proj.lora_B"],
         "gate_up_proj.lora_B": ["gate_proj.lora_B", "up_proj.lora_B"]}


def held_names(name):
    for fused, parts in PARTS.items():
        if fused in name:
            return [name.replace(fused, part) for part in parts]
    return [name]


class HashDropout(torch.nn.Module):
    """Inverted dropout with vktrain's mask: x (B, T, in), sample b of the global batch at position t."""
    step = 0

    def __init__(self, stream):
        super().__init__()
        self.stream = stream

    def forward(self, x):
        p = float(np.float32(DROPOUT))
        B, T_, n = x.shape
        s = np.arange(B, dtype=np.uint64)[:, None, None]
        t = np.arange(T_, dtype=np.uint64)[None, :, None]
        c = np.arange(n, dtype=np.uint64)[None, None, :]
        h = hash32(hash32(hash32(np.uint64(dropout_key(SEED, HashDropout.step, self.stream)) ^ s) ^ t) ^ c)
        keep = torch.from_numpy(((h >> np.uint64(8)) >= np.uint64(int(p * 16777216 + 0.5))).astype(np.float32))
        return x * keep * float(np.float32(1.0 / (1.0 - p)))


def put_dropout(model):
    for name, mod in model.named_modules():
        if hasattr(mod, "lora_dropout") and "default" in mod.lora_dropout:
            parts = name.split(".")
            layer = next(int(parts[i + 1]) for i in range(len(parts)) if parts[i] in ("layers", "h"))
            key = parts[-1] if parts[-1] != "c_proj" else ".".join(parts[-2:])
            mod.lora_dropout["default"] = HashDropout(layer * 8 + SLOTS[key])


def torch_train(base_dir, adapter_dir, x, dropout=False):
    model = PeftModel.from_pretrained(load_base(base_dir), adapter_dir, is_trainable=True)
    model.eval()
    if dropout:
        put_dropout(model)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    losses = []
    for s in range(STEPS):
        HashDropout.step = s
        opt.zero_grad()
        loss = loss_of(model, x)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        losses.append(loss.item())
    state = {k.replace(".default", ""): v.detach().clone() for k, v in model.named_parameters() if v.requires_grad}
    return losses, state


MPIRUN = ["timeout", "300", "mpirun", "--oversubscribe", "-np", "2"]


def vk_run(arch, what, cmd, out, losses, start, state):
    """One vktrain run: its losses against PEFT's, its final adapter against PyTorch's.
    Returns the finished process (None when it failed)."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", LP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode:
        print(r.stdout[-3000:], r.stderr[-3000:])
        check(f"{arch} {what}: vktrain train exits 0", False)
        return None
    metrics = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    for s in range(STEPS):
        vk = next(m["loss"] for m in metrics if m["step"] == s + 1)
        rel = abs(vk - losses[s]) / losses[s]
        check(f"{arch} {what}: step {s + 1} loss equals PEFT's", rel < 1e-5,
              f"vk {vk:.8f} pt {losses[s]:.8f} rel {rel:.2e}")
    vk = load_file(os.path.join(out, "adapter_model.safetensors"))
    check(f"{arch} {what}: the adapter holds PEFT's tensor names", sorted(vk) == sorted(start) == sorted(state),
          f"{sorted(vk)[:2]} ... vs {sorted(start)[:2]} ...")
    worst, least = 0.0, 1e9
    for k in sorted(set(vk) & set(state)):
        moved = (state[k] - start[k]).abs().max().item()
        err = (vk[k] - state[k]).abs().max().item()
        worst, least = max(worst, err / moved), min(least, moved)
    check(f"{arch} {what}: adapters within 2e-3 of their movement", worst <= 2e-3 and least > 1e-3,
          f"worst ratio {worst:.2e}, least movement {least:.2e}")
    return r


def run_dropout(arch, work, src, ad, recipe, x, start, plain_losses):
    """The same training with lora.dropout 0.1 against PyTorch with vktrain's mask."""
    out = os.path.join(work, arch + "-drop")
    losses, state = torch_train(src, ad, x, dropout=True)
    rel = max(abs(a - b) / b for a, b in zip(losses, plain_losses))
    check(f"{arch} dropout: PyTorch's losses differ from those without dropout", rel > 1e-4, f"max rel {rel:.2e}")
    drop = f"lora.dropout={DROPOUT}"
    if not vk_run(arch, "dropout W=1", [VKTRAIN, "train", "--config", recipe, drop, f"output_dir={out}"], out, losses,
                  start, state):
        return
    if shutil.which("mpirun"):
        vk_run(arch, "dropout W=2", MPIRUN + [VKTRAIN, "train", "--config", recipe, drop, f"output_dir={out}-w2",
                                              "batch_size=2"], out + "-w2", losses, start, state)
    shutil.copytree(out, out + "-resumed")
    shutil.rmtree(os.path.join(out + "-resumed", "checkpoints", f"step_{STEPS}"))
    r = subprocess.run([VKTRAIN, "train", "--config", recipe, drop, f"output_dir={out}-resumed", "resume=true"],
                       capture_output=True, text=True)
    same = r.returncode == 0 and open(os.path.join(out, "adapter_model.safetensors"), "rb").read() == open(
        os.path.join(out + "-resumed", "adapter_model.safetensors"), "rb").read()
    check(f"{arch} dropout: a resume from step 2 gives the same adapter bit for bit", same, r.stderr.strip()[-300:])
    conf = json.load(open(os.path.join(out, "adapter_config.json")))
    check(f"{arch} dropout: adapter_config.json has lora_dropout {DROPOUT}",
          abs(conf.get("lora_dropout", -1) - DROPOUT) < 1e-6, str(conf.get("lora_dropout")))


def run_case(arch, work, gen):
    src, ad, out = (os.path.join(work, arch + s) for s in ("-base", "-adapter", "-out"))
    build_base(arch, src, gen)
    make_adapter(arch, src, ad, gen)
    stream = torch.randint(0, 256, (WINDOWS * T + 1,), generator=gen).tolist()
    val = torch.randint(0, 256, (VAL_WINDOWS * T + 1,), generator=gen).tolist()
    write_shard(os.path.join(work, arch + "-train.bin"), stream)
    write_shard(os.path.join(work, arch + "-val.bin"), val)
    recipe = os.path.join(work, arch + ".yaml")
    with open(recipe, "w") as f:
        f.write(f"""seed: {SEED}
output_dir: {out}
model: {{init_from: {src}, max_seq_len: {T}}}
dataset: {{type: tokens, path: {work}/{arch}-train.bin, shuffle: false}}
batch_size: {WINDOWS // 2}
gradient_accumulation_steps: 2
max_steps: {STEPS}
optimizer: {{lr: 1.0e-2, betas: [0.9, 0.95], eps: 1.0e-8, weight_decay: 0.1}}
lr_scheduler: {{type: constant}}
clip_grad_norm: 1.0
lora: {{init_from: {ad}, merge_on_save: true}}
save_every_n_steps: 2
""")
    x = torch.tensor([stream[i * T:i * T + T + 1] for i in range(WINDOWS)])
    losses, state = torch_train(src, ad, x)
    start = load_file(os.path.join(ad, "adapter_model.safetensors"))
    # W x A x B = 1 x 2 x 4, and 2 x 2 x 2 under mpirun with dist.zero.
    if not vk_run(arch, "W=1", [VKTRAIN, "train", "--config", recipe], out, losses, start, state):
        return
    if not shutil.which("mpirun"):
        check(f"{arch} W=2: mpirun found (apt-get install openmpi-bin)", False)
    else:
        vk_run(arch, "W=2 zero", MPIRUN + [VKTRAIN, "train", "--config", recipe, f"output_dir={out}-w2",
                                           "batch_size=2", "dist.zero=1"], out + "-w2", losses, start, state)
    vk = load_file(os.path.join(out, "adapter_model.safetensors"))
    run_dropout(arch, work, src, ad, recipe, x, start, losses)

    # Resume from step 2's checkpoint: the same adapter bit for bit.
    shutil.copytree(out, out + "-resumed")
    shutil.rmtree(os.path.join(out + "-resumed", "checkpoints", f"step_{STEPS}"))
    r = subprocess.run([VKTRAIN, "train", "--config", recipe, f"output_dir={out}-resumed", "resume=true"],
                       capture_output=True, text=True)
    same = r.returncode == 0 and open(os.path.join(out, "adapter_model.safetensors"), "rb").read() == open(
        os.path.join(out + "-resumed", "adapter_model.safetensors"), "rb").read()
    check(f"{arch}: a resume from step 2 gives the same adapter bit for bit", same, r.stderr.strip()[-300:])

    conf = json.load(open(os.path.join(out, "adapter_config.json")))
    check(f"{arch}: adapter_config.json", conf.get("r") == RANK and conf.get("lora_alpha") == ALPHA and
          sorted(conf.get("target_modules", [])) == sorted(TARGETS[arch]) and
          conf.get("fan_in_fan_out") == (arch == "gpt2") and conf.get("peft_type") == "LORA" and
          conf.get("base_model_name_or_path") == src, str(conf))
    ckpt = os.path.join(out, "checkpoints", f"step_{STEPS}")
    files = sorted(os.listdir(ckpt))
    opt = load_file(os.path.join(ckpt, "optimizer.safetensors"))
    check(f"{arch}: the checkpoint holds the adapter and its AdamW state only",
          "model.safetensors" not in files and "adapter_model.safetensors" in files and
          sorted(opt) == sorted(f"{s}.{h}" for k in vk for h in held_names(k) for s in ("exp_avg", "exp_avg_sq")),
          str(files))

    xv = torch.tensor([val[i * T:i * T + T] for i in range(VAL_WINDOWS)])
    with torch.no_grad():
        via_peft = PeftModel.from_pretrained(load_base(src), out)(input_ids=xv).logits
        merged = load_base(os.path.join(out, "merged"))(input_ids=xv).logits
        base = load_base(src)(input_ids=xv).logits
    diff, scale = (via_peft - merged).abs().max().item(), merged.abs().max().item()
    check(f"{arch}: PEFT loads vktrain's adapter and gives its merged model's logits", diff < 1e-4 * scale,
          f"max |diff| {diff:.2e}, max |logit| {scale:.2f}")
    check(f"{arch}: the adapter changes the base's logits", (merged - base).abs().max().item() > 1e-2)
    if arch == "llama":
        run_bf16_base(arch, work, src, ad, recipe, x, xv, start)
    return (arch, work, src, ad, recipe, x, xv, start)


def run_bf16_base(arch, work, src, ad, recipe, x, xv, start):
    src16, out = os.path.join(work, arch + "-base16"), os.path.join(work, arch + "-out16")
    load_base(src).to(torch.bfloat16).save_pretrained(src16)
    losses, state = torch_train(src16, ad, x)
    r = vk_run(arch, "bf16 base", [VKTRAIN, "train", "--config", recipe, f"model.init_from={src16}",
                                   "model.base_dtype=bf16", f"output_dir={out}"], out, losses, start, state)
    if not r:
        return
    check(f"{arch} bf16 base: vktrain keeps the base's matrices in bf16", "(its matrices in bf16)" in r.stdout,
          r.stdout[:400])
    with torch.no_grad():
        via_peft = PeftModel.from_pretrained(load_base(src16), out)(input_ids=xv).logits
        merged = load_base(os.path.join(out, "merged"))(input_ids=xv).logits
    diff, scale = (via_peft - merged).abs().max().item(), merged.abs().max().item()
    check(f"{arch} bf16 base: PEFT over the bf16 base with vktrain's adapter gives its merged model's logits",
          diff < 1e-4 * scale, f"max |diff| {diff:.2e}, max |logit| {scale:.2f}")


# NF4 (bitsandbytes' NormalFloat4 table, QLoRA) as bitsandbytes' CUDA kernel
# quantizes: per block of 64 elements absmax, x * (1 / absmax) in float32,
# the code index by the float32 midpoints (a value on one takes the lower
# index); a value is code[q] * absmax in float32. Double quantization: the
# absmax values less their mean, in blocks of 256 scaled by 1 / max |.|,
# to bitsandbytes' signed 8-bit dynamic code by its binary search.
NF4 = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                0.7229568362236023, 1.0], dtype=np.float32)


def dynamic_code():
    f = np.float32
    out = [f(0), f(1)]
    for i in range(7):
        n = 2 ** i + 1
        b = [f(0.1 + 0.9 * j / (n - 1)) for j in range(n)]
        for j in range(n - 1):
            mean = f(f(b[j] + b[j + 1]) / f(2))
            out += [f(f(10.0 ** (i - 6)) * mean), f(-f(10.0 ** (i - 6)) * mean)]
    return np.sort(np.array(out, dtype=np.float32))


def code8_index(code, x):
    pivot, up, lo, lower, upper = 127, 255, 0, np.float32(-1), np.float32(1)
    for i in (64, 32, 16, 8, 4, 2, 1):
        if x > code[pivot]:
            lo, lower, pivot = pivot, code[pivot], pivot + i
        else:
            up, upper, pivot = pivot, code[pivot], pivot - i
    val = code[pivot]
    upper = code[255] if up == 255 else upper
    lower = code[0] if lo == 0 else lower
    if x > val:
        return up if x > np.float32((upper + val) * np.float32(0.5)) else pivot
    return lo if x < np.float32((lower + val) * np.float32(0.5)) else pivot


def nf4_dequantized(w, double_quant):
    """w (a float32 array, row-major as vktrain holds the weight) through NF4 and back."""
    x = w.reshape(-1).astype(np.float32)
    n, nb = x.size, (x.size + 63) // 64
    blocks = np.zeros(nb * 64, np.float32)
    blocks[:n] = x
    blocks = blocks.reshape(nb, 64)
    absmax = np.abs(blocks).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = blocks * (np.float32(1) / absmax)[:, None]
    mid = ((NF4[:-1] + NF4[1:]) / np.float32(2)).astype(np.float32)
    q = np.where(absmax[:, None] > 0, np.searchsorted(mid, scaled, side="left"), 7)
    if double_quant:
        code = dynamic_code()
        offset = np.float32(absmax.astype(np.float64).mean())
        a = (absmax - offset).astype(np.float32)
        for b0 in range(0, nb, 256):
            part = a[b0:b0 + 256]
            m = np.abs(part).max()
            r = np.float32(1) / m if m > 0 else np.float32(0)
            qs = [code8_index(code, np.float32(v * r)) if m > 0 else 127 for v in part]
            absmax[b0:b0 + 256] = (code[qs] * m).astype(np.float32) + offset
    return (NF4[q] * absmax[:, None]).astype(np.float32).reshape(-1)[:n].reshape(w.shape)


def nf4_base(arch, src, dst, double_quant):
    """The base as vktrain's model.base_dtype nf4 holds it, in float32: the
    layers' linear weights through NF4 (gpt2's Conv1D weights as their
    transposes, vktrain's layout), the embeddings (and an untied head)
    rounded to bf16, the rest as is."""
    model = load_base(src)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() != 2:
                continue
            if ".layers." in name or ".h." in name:
                conv = arch == "gpt2"
                w = (p.t() if conv else p).detach().numpy()
                d = torch.from_numpy(nf4_dequantized(np.ascontiguousarray(w), double_quant))
                p.copy_(d.t() if conv else d)
            else:
                p.copy_(p.to(torch.bfloat16).float())
    model.save_pretrained(dst)


def run_nf4_base(arch, work, src, ad, recipe, x, xv, start):
    """LoRA over an NF4 base (model.base_dtype nf4, with and without
    model.nf4_double_quant): PEFT trains over the same dequantized base."""
    for dq in (False, True):
        tag = "nf4 double-quant base" if dq else "nf4 base"
        srcq, out = os.path.join(work, f"{arch}-nf4base{int(dq)}"), os.path.join(work, f"{arch}-nf4out{int(dq)}")
        nf4_base(arch, src, srcq, dq)
        losses, state = torch_train(srcq, ad, x)
        keys = ["model.base_dtype=nf4", f"model.nf4_double_quant={str(dq).lower()}"]
        split = (MPIRUN + [VKTRAIN, "train", "--config", recipe, "batch_size=2", "dist.zero=1"]) if dq and \
            shutil.which("mpirun") else [VKTRAIN, "train", "--config", recipe]
        r = vk_run(arch, tag + (" W=2 zero" if dq else " W=1"), split + keys + [f"output_dir={out}"], out, losses,
                   start, state)
        if not r:
            continue
        check(f"{arch} {tag}: vktrain keeps the layers' matrices in NF4", "in NF4" in r.stdout, r.stdout[:400])
        with torch.no_grad():
            via_peft = PeftModel.from_pretrained(load_base(srcq), out)(input_ids=xv).logits
            merged = load_base(os.path.join(out, "merged"))(input_ids=xv).logits
            plain = PeftModel.from_pretrained(load_base(src), out)(input_ids=xv).logits
        diff, scale = (via_peft - merged).abs().max().item(), merged.abs().max().item()
        check(f"{arch} {tag}: PEFT over the dequantized base with vktrain's adapter gives its merged model's logits",
              diff < 1e-4 * scale, f"max |diff| {diff:.2e}, max |logit| {scale:.2f}")
        check(f"{arch} {tag}: the quantization shows (the fp32 base's logits differ)",
              (plain - merged).abs().max().item() > 1e-3 * scale)


def main():
    print(f"peft {peft.__version__}, transformers {transformers.__version__}, torch {torch.__version__}")
    torch.manual_seed(12)  # PEFT's initialization of A
    gen = torch.Generator().manual_seed(12)
    with tempfile.TemporaryDirectory() as work:
        cases = {arch: run_case(arch, work, gen) for arch in ("llama", "gpt2", "phi3")}
        # after the others (PEFT's loads draw from torch's global generator)
        for arch in ("llama", "gpt2"):
            if cases[arch]:
                run_nf4_base(*cases[arch])
        # The llama adapter over the gpt2 base: refused at start, naming why.
        r = subprocess.run([VKTRAIN, "train", "--config", os.path.join(work, "gpt2.yaml"),
                            f"lora.init_from={work}/llama-adapter", f"output_dir={work}/mismatch"],
                           capture_output=True, text=True)
        check("a llama adapter over a gpt2 base is refused", r.returncode != 0 and
              "names no linear layer of this gpt2 model" in r.stderr, r.stderr.strip()[-300:])
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)


main()
