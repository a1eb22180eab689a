"""hf_oracle: what the parity tests ask of Hugging Face transformers itself:
a byte-level BPE tokenizer trained here, tiny random models built and
saved by transformers, their mean cross-entropy on token windows, and
their greedy decoding as `vktrain generate --temperature 0` prints it.

Imported by hf_transformers_parity.py (transformers 4.44.2 over Debian
12's torch, in process), and run as a program by hf_families_parity.py
inside the Debian unstable tree of scripts/sid.sh (its python3-torch and
a newer transformers, for the families 4.44.2 lacks):
    python hf_oracle.py REQUESTS.json RESULTS.json
REQUESTS.json is a list of {"op": ..., ...}; RESULTS.json gets one result
per request, in order (the ops: build, loss, greedy, encode, below)."""
import json
import os
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast
from transformers.models.gpt2.tokenization_gpt2 import bytes_to_unicode

MODEL_VOCAB = 320
CORPUS = ["the quick brown fox jumps over the lazy dog", "a stitch in time saves nine",
          "to be or not to be, that is the question", "1234 5678 hello world"] * 20


def make_tokenizer(d):
    """300 tokens of byte-level BPE with bos = eos = <|endoftext|> and a pad, saved in d."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|endoftext|>", "<|pad|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<|pad|>")
    fast.save_pretrained(d)
    return fast


def randomize(model, gen):
    """Every parameter random: matrices N(0, 0.1), biases N(0, 0.1), norm weights 1 + N(0, 0.1)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen) * 0.1
            norm = p.dim() == 1 and ("norm" in name or ".ln_" in name) and name.endswith("weight")
            p.copy_(noise + 1.0 if norm else noise)


def load(folder, **kw):
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32, attn_implementation="eager", **kw)
    model.eval()
    return model


def loss_of(model, windows):
    """Mean cross-entropy of each window's next tokens."""
    x = torch.tensor(windows, dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=x[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1)).item()


def greedy(folder, prompt, n_new):
    """What `vktrain generate --temperature 0` must print for the folder:
    the prompt, then transformers' greedy decoding of <bos> + the prompt
    (the argmax over the tokenizer's ids, stopping at eos), as bytes with a
    newline; and the smallest top-1 margin (no choice may be a near tie).
    Decoded as generate() does, with the key/value cache: the prompt in one
    forward, then one token per forward (where the two differ, as longrope's
    tables chosen per forward do, this is what users get); Gemma 2's cache
    of transformers 4.44, made inside the forward, holds only the prompt,
    so it is decoded by whole forwards of the sequence (the same model)."""
    tok = AutoTokenizer.from_pretrained(folder)
    model = load(folder)
    seq, margin = [tok.bos_token_id] + tok(prompt)["input_ids"], float("inf")
    past, feed, cached = None, seq, model.config.model_type != "gemma2"
    with torch.no_grad():
        for _ in range(n_new):
            out = model(input_ids=torch.tensor([feed if cached else seq]), past_key_values=past, use_cache=cached)
            past, logits = out.past_key_values, out.logits[0, -1, :len(tok)]
            top = torch.topk(logits, 2).values
            margin = min(margin, (top[0] - top[1]).item())
            nxt = int(torch.argmax(logits))
            if nxt == tok.eos_token_id:
                break
            seq.append(nxt)
            feed = [nxt]
    new_ids = seq[1 + len(tok(prompt)["input_ids"]):]
    # The bytes of each token (random tokens may split UTF-8 sequences, so
    # compare bytes): a special token's content, else its byte-level string
    # mapped back to bytes.
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    specials = set(tok.all_special_ids)
    want = prompt.encode() + b"".join(
        t.encode() if i in specials else bytes(byte_of[c] for c in t)
        for i, t in zip(new_ids, tok.convert_ids_to_tokens(new_ids))) + b"\n"
    return want, margin, len(new_ids)


# ---- the families the program builds (transformers newer than 4.44) ----

def build_family(arch, d, seed):
    """A tiny random model of arch saved in d (float32, one file) with the
    tokenizer: vocab 320, hidden 32, 2 layers, 4 heads (2 kv) of 16 (wider
    than hidden / heads; Qwen2: of 8, it has no head_dim), MLP 64, tied.
    The windowed ones: a window of 5 on one layer of the two (Qwen2 from
    max_window_layers 1, Qwen3 from layer_types on layer 0, SmolLM3 on its
    layer without RoPE, from no_rope_layers)."""
    from transformers import Gemma3TextConfig, Phi3Config, Qwen2Config, Qwen3Config, SmolLM3Config
    tok = make_tokenizer(d)
    ids = dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    common = dict(vocab_size=MODEL_VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  tie_word_embeddings=True, rope_theta=1000.0, **ids)
    if arch == "qwen3":
        cfg = Qwen3Config(**common, head_dim=16, use_sliding_window=False)
    elif arch == "qwen3_window":
        cfg = Qwen3Config(**common, head_dim=16, use_sliding_window=True, sliding_window=5,
                          layer_types=["sliding_attention", "full_attention"])
    elif arch == "qwen2_window":
        cfg = Qwen2Config(**common, use_sliding_window=True, sliding_window=5, max_window_layers=1)
    elif arch == "phi3_partial":  # Phi-4-mini's kind: partial rotary, longrope, tied; a window
        # heads of hidden / heads = 8 (transformers 4.57 checks longrope's
        # factors against that quotient even where head_dim is set), 4 rotated
        cfg = Phi3Config(**common, partial_rotary_factor=0.5, sliding_window=5, original_max_position_embeddings=16,
                         rope_scaling={"type": "longrope", "short_factor": [1.0, 2.5], "long_factor": [2.0, 7.0]})
    elif arch == "gemma3":  # Gemma 3 270M's kind: q/k norms, local and global layers with their own bases
        cfg = Gemma3TextConfig(**common, head_dim=16, query_pre_attn_scalar=12, sliding_window=5,
                               layer_types=["sliding_attention", "full_attention"], rope_local_base_freq=100.0)
    elif arch == "gemma3_mm":  # Gemma 3 4B's kind: the same text model inside a multimodal folder
        from transformers import Gemma3Config, SiglipVisionConfig
        text = Gemma3TextConfig(**common, head_dim=16, query_pre_attn_scalar=12, sliding_window=5,
                                layer_types=["sliding_attention", "full_attention"], rope_local_base_freq=100.0)
        vision = SiglipVisionConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                    image_size=28, patch_size=14)
        # the image tokens outside the vocabulary: text alone never holds one
        cfg = Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4,
                           image_token_index=MODEL_VOCAB + 2, boi_token_index=MODEL_VOCAB + 1,
                           eoi_token_index=MODEL_VOCAB + 3, **ids)
    elif arch == "smollm3":
        cfg = SmolLM3Config(**common, head_dim=16, no_rope_layers=[0, 1], use_sliding_window=True,
                            sliding_window=5)
    else:
        raise ValueError(f"no family {arch!r}")
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    randomize(model, torch.Generator().manual_seed(seed))
    model.save_pretrained(d)
    return {"n_tok": len(tok), "bos": tok.bos_token_id, "eos": tok.eos_token_id, "pad": tok.pad_token_id,
            "transformers": __import__("transformers").__version__, "torch": torch.__version__}


# ---- bitsandbytes 4-bit folders (test_bnb_folders) ----

def bnb_build(req):
    """A tiny random llama (untied, vocab 320, hidden 128, MLP 192, 2 layers, 4 heads of 32,
    2 kv heads) or gpt2 (tied, n_embd 128, 2 layers, 4 heads), every parameter random,
    saved in req["src"] (float32); then quantized by transformers with bitsandbytes
    (req's quant_type, double_quant, and dtype: the dtype it loads in, the quantized
    weights dequantize to) and saved in req["dst"] (in shards of req["max_shard_size"]); and bitsandbytes' own
    dequantization of each 4-bit weight of the folder as transformers loads it back
    (float32, the Linear4bit's (out, in)) with the folder's other parameters (widened
    to float32), in req["dequant"]; "n": how many are 4-bit. With req["plain"] (llama):
    those values as a full-precision folder there, and a tokenizer in it and in req["dst"]."""
    import bitsandbytes
    import bitsandbytes.functional as F
    from safetensors.torch import save_file
    from transformers import BitsAndBytesConfig, GPT2Config, LlamaConfig
    if req["arch"] == "llama":
        cfg = LlamaConfig(vocab_size=MODEL_VOCAB, hidden_size=128, intermediate_size=192, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                          tie_word_embeddings=False, rope_theta=1000.0)
    else:
        cfg = GPT2Config(vocab_size=MODEL_VOCAB, n_embd=128, n_layer=2, n_head=4, n_positions=64)
    torch.manual_seed(req["seed"])
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    randomize(model, torch.Generator().manual_seed(req["seed"]))
    model.save_pretrained(req["src"])
    dtype = getattr(torch, req["dtype"])
    q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=req["quant_type"],
                           bnb_4bit_use_double_quant=req["double_quant"], bnb_4bit_compute_dtype=torch.float32)
    AutoModelForCausalLM.from_pretrained(req["src"], quantization_config=q, dtype=dtype).save_pretrained(
        req["dst"], max_shard_size=req.get("max_shard_size", "5GB"))
    back = load(req["dst"])
    out, n = {}, 0
    for name, mod in back.named_modules():
        if isinstance(mod, bitsandbytes.nn.Linear4bit):
            w = mod.weight
            out[name + ".weight"] = F.dequantize_4bit(w.data, w.quant_state).float().contiguous()
            n += 1
    for name, p in back.named_parameters():  # the rest as the folder holds it (bf16, f16 or f32)
        out.setdefault(name, p.detach().float().contiguous())
    save_file(out, req["dequant"])
    if "plain" in req:  # llama: the same values in a full-precision folder; a tokenizer in both folders
        import shutil
        os.makedirs(req["plain"], exist_ok=True)
        shutil.copy(os.path.join(req["src"], "config.json"), req["plain"])
        save_file(out, os.path.join(req["plain"], "model.safetensors"), metadata={"format": "pt"})
        make_tokenizer(req["plain"])
        make_tokenizer(req["dst"])
    return {"bitsandbytes": bitsandbytes.__version__, "transformers": __import__("transformers").__version__,
            "torch": torch.__version__, "n": n}


def with_weights(model, path):
    """model with the tensors of the safetensors file path in place of its own (gpt2's Conv1D
    weights given as (out, in))."""
    from safetensors.torch import load_file
    from transformers.pytorch_utils import Conv1D
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, w in load_file(path).items():
            conv = isinstance(model.get_submodule(name.rsplit(".", 1)[0]), Conv1D)
            params[name].copy_(w.T if conv else w)
    return model


def peft_compare(req):
    """vktrain's adapter folder req["adapter"] in PEFT, against vktrain's merged folder
    req["merged"] on req["windows"]: over the full-precision source req["src"] with
    bitsandbytes' dequantized weights req["dequant"] in place ("diff"), and over the 4-bit
    folder req["base"] as transformers loads it, with bitsandbytes' Linear4bit ("diff_4bit");
    the largest |logit|; how far the 4-bit folder's own forward is from its dequantized
    weights' ("noise_4bit"), and the difference without the adapter ("control")."""
    from peft import PeftModel
    x = torch.tensor(req["windows"], dtype=torch.long)
    with torch.no_grad():
        merged = load(req["merged"])(input_ids=x).logits
        dequant = with_weights(load(req["src"]), req["dequant"])
        plain = dequant(input_ids=x).logits
        adapted = PeftModel.from_pretrained(dequant, req["adapter"])(input_ids=x).logits
        base = load(req["base"])
        own = base(input_ids=x).logits
        # its CPU device map would have PEFT size memory from /proc, which the tree's chroot lacks
        base.hf_device_map = None
        adapted4 = PeftModel.from_pretrained(base, req["adapter"])(input_ids=x).logits
    return {"diff": (adapted - merged).abs().max().item(), "diff_4bit": (adapted4 - merged).abs().max().item(),
            "scale": merged.abs().max().item(), "noise_4bit": (own - plain).abs().max().item(),
            "control": (plain - merged).abs().max().item(), "peft": __import__("peft").__version__}


def control_model(folder, control):
    """The folder's model with one feature taken out (the controls)."""
    if control == "full_rotary":  # RoPE over whole heads (and so without the per-pair factors)
        return load(folder, partial_rotary_factor=1.0, rope_scaling=None)
    model = load(folder)
    if control == "no_qk_norm":
        for layer in model.model.layers:
            layer.self_attn.q_norm = torch.nn.Identity()
            layer.self_attn.k_norm = torch.nn.Identity()
    elif control == "one_rope_base":  # Gemma 3's local layers rotated as the global ones
        text = getattr(model.model, "language_model", model.model)  # a multimodal Gemma 3: its text model
        text.rotary_emb_local = text.rotary_emb
    elif control == "no_window":
        if model.config.model_type == "phi3":  # one mask for every layer, from the config
            model.config.sliding_window = None
        for layer in model.model.layers:
            layer.attention_type = "full_attention"
    elif control == "rope_everywhere":
        for layer in model.model.layers:
            layer.self_attn.use_rope = 1
    elif control:
        raise ValueError(f"no control {control!r}")
    return model


def serve(request):
    op = request["op"]
    if op == "build":
        return build_family(request["arch"], request["dir"], request["seed"])
    if op == "bnb_build":
        return bnb_build(request)
    if op == "peft_compare":
        return peft_compare(request)
    if op == "loss":
        model = control_model(request["dir"], request.get("control"))
        if "weights" in request:  # these tensors in place of the folder's (bitsandbytes' dequantized weights)
            model = with_weights(model, request["weights"])
        return loss_of(model, request["windows"])
    if op == "greedy":
        want, margin, n = greedy(request["dir"], request["prompt"], request["n"])
        return {"want": want.hex(), "margin": margin, "n": n}
    if op == "encode":
        tok = AutoTokenizer.from_pretrained(request["dir"])
        return {"ids": tok(request["text"])["input_ids"], "pad": tok.pad_token_id}
    raise ValueError(f"no op {op!r}")


if __name__ == "__main__":
    requests = json.load(open(sys.argv[1]))
    results = [serve(r) for r in requests]
    with open(sys.argv[2], "w") as f:
        json.dump(results, f)
