"""parity_torch_model: an independent plain-PyTorch implementation of the
two architectures vktrain trains, and the file formats it reads and writes,
shared by the PyTorch parity tests (test_parity_torch.py: one forward and
backward through the shaders; test_train_parity_torch.py: whole training
steps through `vktrain train`).

* Files: a pure-python safetensors writer and reader (F32 only) and the
  Hugging Face config.json of LlamaForCausalLM / GPT2LMHeadModel.
* Models, written out plainly (transformers is not imported): llama with
  RMSNorm, RoPE in the HF rotate_half convention with inv_freq =
  1/theta^(arange(0,hd,2)/hd) in float32, grouped-query attention via
  repeat_kv, SwiGLU, tied or untied head; gpt2 with LayerNorm, learned
  positions, Conv1D weights stored (in, out), GELU tanh, tied head.
  Parameters are a dict of HF name -> tensor in HF layout, so a dict read
  from a model.safetensors is directly a model."""
import json
import math
import struct

import numpy as np
import torch

PAD, BOS, EOS, VOCAB = 258, 256, 257, 259

# ---------------------------------------------------------------- files


def write_safetensors(path, tensors):
    """tensors: name -> float32 numpy array, written as F32 in order."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n].decode())
    header.pop("__metadata__", None)
    data, out = buf[8 + n:], {}
    for k, v in header.items():
        assert v["dtype"] == "F32", f"{path}: {k}: dtype {v['dtype']}"
        b, e = v["data_offsets"]
        out[k] = np.frombuffer(data[b:e], dtype="<f4").reshape(v["shape"])
    return out


# ---------------------------------------------------------------- models


def head_dim(c):
    """Each head's width: c["head_dim"] where given (Qwen3, Mistral), else dim / heads."""
    return c.get("head_dim") or c["dim"] // c["heads"]


def hf_config(c):
    """llama; qwen3 with q/k norms (c["qk_norm"]); mistral without a window
    where the head size is not dim / heads."""
    if c["arch"] == "llama":
        cfg = {
            "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB,
            "hidden_size": c["dim"], "intermediate_size": c["hidden"], "num_hidden_layers": c["layers"],
            "num_attention_heads": c["heads"], "num_key_value_heads": c["kv_heads"],
            "max_position_embeddings": c["max_seq_len"], "rms_norm_eps": c["eps"], "rope_theta": c["theta"],
            "tie_word_embeddings": c["tied"], "hidden_act": "silu",
        }
        if c.get("qk_norm"):
            cfg.update(architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=head_dim(c),
                       use_sliding_window=False, attention_bias=False)
        elif head_dim(c) * c["heads"] != c["dim"]:
            cfg.update(architectures=["MistralForCausalLM"], model_type="mistral", head_dim=head_dim(c),
                       sliding_window=None)
        return cfg
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": VOCAB, "n_embd": c["dim"],
        "n_layer": c["layers"], "n_head": c["heads"], "n_positions": c["max_seq_len"], "n_inner": c["hidden"],
        "layer_norm_epsilon": c["eps"], "activation_function": "gelu_new",
    }


def random_params(c, gen):
    """HF name -> float32 tensor with HF shape. Scales keep activations and
    logits O(1) (an unsaturated softmax, losses near log V); norm weights and
    biases are random too, so no gradient is checked at a trivial point."""
    D, F, V, L = c["dim"], c["hidden"], VOCAB, c["layers"]
    hd = head_dim(c)
    qd = c["heads"] * hd

    def mat(*shape, std=None):
        std = std if std is not None else 1.0 / math.sqrt(shape[-1] if len(shape) > 1 else D)
        return torch.randn(*shape, generator=gen) * std

    def near_one(n):
        return 1.0 + 0.2 * torch.randn(n, generator=gen)

    p = {}
    if c["arch"] == "llama":
        kv = c["kv_heads"] * hd
        p["model.embed_tokens.weight"] = mat(V, D, std=0.4)
        for i in range(L):
            pre = f"model.layers.{i}."
            p[pre + "input_layernorm.weight"] = near_one(D)
            p[pre + "self_attn.q_proj.weight"] = mat(qd, D)
            p[pre + "self_attn.k_proj.weight"] = mat(kv, D)
            p[pre + "self_attn.v_proj.weight"] = mat(kv, D)
            p[pre + "self_attn.o_proj.weight"] = mat(D, qd)
            if c.get("qk_norm"):
                p[pre + "self_attn.q_norm.weight"] = near_one(hd)
                p[pre + "self_attn.k_norm.weight"] = near_one(hd)
            p[pre + "post_attention_layernorm.weight"] = near_one(D)
            p[pre + "mlp.gate_proj.weight"] = mat(F, D)
            p[pre + "mlp.up_proj.weight"] = mat(F, D)
            p[pre + "mlp.down_proj.weight"] = mat(D, F)
        p["model.norm.weight"] = near_one(D)
        if not c["tied"]:
            p["lm_head.weight"] = mat(V, D)
    else:
        p["wte.weight"] = mat(V, D, std=0.4)
        p["wpe.weight"] = mat(c["max_seq_len"], D, std=0.2)
        for i in range(L):
            pre = f"h.{i}."
            p[pre + "ln_1.weight"] = near_one(D)
            p[pre + "ln_1.bias"] = 0.1 * torch.randn(D, generator=gen)
            p[pre + "attn.c_attn.weight"] = mat(D, 3 * D, std=D ** -0.5)  # Conv1D: (in, out)
            p[pre + "attn.c_attn.bias"] = 0.1 * torch.randn(3 * D, generator=gen)
            p[pre + "attn.c_proj.weight"] = mat(D, D, std=D ** -0.5)
            p[pre + "attn.c_proj.bias"] = 0.1 * torch.randn(D, generator=gen)
            p[pre + "ln_2.weight"] = near_one(D)
            p[pre + "ln_2.bias"] = 0.1 * torch.randn(D, generator=gen)
            p[pre + "mlp.c_fc.weight"] = mat(D, F, std=D ** -0.5)
            p[pre + "mlp.c_fc.bias"] = 0.1 * torch.randn(F, generator=gen)
            p[pre + "mlp.c_proj.weight"] = mat(F, D, std=F ** -0.5)
            p[pre + "mlp.c_proj.bias"] = 0.1 * torch.randn(D, generator=gen)
        p["ln_f.weight"] = near_one(D)
        p["ln_f.bias"] = 0.1 * torch.randn(D, generator=gen)
    return {k: v.float() for k, v in p.items()}


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope_hf(x, pos, theta):
    """x: (B, H, T, hd); pos: (B, T). HF LlamaRotaryEmbedding + apply_rotary_pos_emb."""
    hd = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    freqs = pos.float()[:, :, None] * inv_freq[None, None, :]  # (B, T, hd/2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]
    return x * cos + rotate_half(x) * sin


def rope_interleaved(x, pos, theta):
    """The GPT-J / Meta pairing (2i, 2i+1): the wrong convention, for the negative control."""
    hd = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    ang = pos.float()[:, :, None] * inv_freq[None, None, :]
    cos, sin = ang.cos()[:, None], ang.sin()[:, None]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


def attention(q, k, v, mask):
    """q: (B, H, T, hd); k, v: (B, Hkv, T, hd), each kv head serving H/Hkv
    consecutive query heads (HF repeat_kv); mask: (B, T, T) bool, True = attend."""
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(~mask[:, None], float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


# The inputs of the linear layers' products: None (float32), torch.float16
# or torch.bfloat16, as vktrain's matmuls on cooperative matrices take them
# (VKTRAIN_MATMUL_INPUTS, precision: bf16): both operands of every product,
# forward and backward, rounded to that type (to nearest even), the
# products summed in float32.
MATMUL_INPUTS = None


class _Rounded(torch.autograd.Function):
    """a @ b on operands rounded to MATMUL_INPUTS; its backward rounds the
    incoming gradient and the saved operands the same way (dA = r(g)·r(b)^T,
    dB = r(a)^T·r(g)), as vktrain's nn and tn do."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _round(a) @ _round(b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        g = _round(g)
        return g @ _round(b).transpose(-1, -2), _round(a).transpose(-1, -2) @ g


def _round(t):
    return t.to(MATMUL_INPUTS).to(torch.float32)


def mm(a, b):
    """A linear layer's product a @ b (a: (..., k), b: (k, n))."""
    if MATMUL_INPUTS is None:
        return a @ b
    a2 = a.reshape(-1, a.shape[-1])
    return _Rounded.apply(a2, b).reshape(*a.shape[:-1], b.shape[-1])


def forward(c, p, tokens, pos, mask, rope=rope_hf):
    """Logits (B, T, V) for tokens, pos: (B, T) int64 and mask: (B, T, T)."""
    B, T = tokens.shape
    D, H = c["dim"], c["heads"]
    hd = head_dim(c)
    heads = lambda t, n: t.view(B, T, n, hd).transpose(1, 2)
    merge = lambda t: t.transpose(1, 2).reshape(B, T, H * hd)
    if c["arch"] == "llama":
        x = p["model.embed_tokens.weight"][tokens]
        for i in range(c["layers"]):
            w = lambda n: p[f"model.layers.{i}.{n}.weight"]
            h = rms_norm(x, w("input_layernorm"), c["eps"])
            q, k = heads(mm(h, w("self_attn.q_proj").T), H), heads(mm(h, w("self_attn.k_proj").T), c["kv_heads"])
            if c.get("qk_norm"):  # Qwen3: RMSNorm over each head, before RoPE
                q, k = rms_norm(q, w("self_attn.q_norm"), c["eps"]), rms_norm(k, w("self_attn.k_norm"), c["eps"])
            q, k = rope(q, pos, c["theta"]), rope(k, pos, c["theta"])
            v = heads(mm(h, w("self_attn.v_proj").T), c["kv_heads"])
            x = x + mm(merge(attention(q, k, v, mask)), w("self_attn.o_proj").T)
            h = rms_norm(x, w("post_attention_layernorm"), c["eps"])
            gate, up = mm(h, w("mlp.gate_proj").T), mm(h, w("mlp.up_proj").T)
            x = x + mm(gate * torch.sigmoid(gate) * up, w("mlp.down_proj").T)
        x = rms_norm(x, p["model.norm.weight"], c["eps"])
        head = p["model.embed_tokens.weight"] if c["tied"] else p["lm_head.weight"]
        return mm(x, head.T)
    x = p["wte.weight"][tokens] + p["wpe.weight"][pos]
    for i in range(c["layers"]):
        w = lambda n: p[f"h.{i}.{n}.weight"]
        b = lambda n: p[f"h.{i}.{n}.bias"]
        h = layer_norm(x, w("ln_1"), b("ln_1"), c["eps"])
        q, k, v = (mm(h, w("attn.c_attn")) + b("attn.c_attn")).split(D, dim=-1)
        a = attention(heads(q, H), heads(k, H), heads(v, H), mask)
        x = x + mm(merge(a), w("attn.c_proj")) + b("attn.c_proj")
        h = layer_norm(x, w("ln_2"), b("ln_2"), c["eps"])
        x = x + mm(gelu_tanh(mm(h, w("mlp.c_fc")) + b("mlp.c_fc")), w("mlp.c_proj")) + b("mlp.c_proj")
    x = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"], c["eps"])
    return mm(x, p["wte.weight"].T)
