"""hf_transformers_parity: vktrain against Hugging Face transformers itself,
run by test_hf_transformers.sh in a venv that holds
transformers==4.44.2 over Debian's torch.

transformers builds and saves six tiny random models with a byte-level
BPE tokenizer (trained here with `tokenizers`, saved by
PreTrainedTokenizerFast with bos/eos/pad): vocab 300 tokens, model
vocab_size 320, dim 32, 2 layers, 4 heads, MLP 64, every parameter random
(biases and norm weights included, so a bias left out or misplaced shows):
  llama: GQA 4/2, untied, rope_theta 10 with rope_scaling llama3 (factor 4,
         low 1, high 4, original 32: with head size 8 the four frequencies
         fall in all three regimes: kept, blended, divided), attention_bias
         and mlp_bias; saved as bfloat16 in shards with
         model.safetensors.index.json;
  qwen2: GQA 4/2, tied, q/k/v biases; float32, one file;
  gpt2:  n_positions 64 trained at max_seq_len 16 (the position table
         keeps its 64 rows); float16, one file;
  mistral: GQA 4/2, untied, head_dim 16 (q_proj 64 wide against hidden
         32: the head size apart from hidden / heads), no sliding window;
         float32, one file;
  mistral_window: GQA 4/2, tied, sliding_window 5 at max_seq_len 16 (each
         query sees its last 5 keys, as the eager mask of transformers
         writes it, in training and in generation); float32, one file;
  phi3:  GQA 4/2, untied, fused qkv_proj and gate_up_proj (split on load,
         fused again on export), longrope rope_scaling: the per-pair short
         factors in training (T = 16 = original_max_position_embeddings),
         the long ones where generation passes position 15 (transformers
         picks them per forward by its last position; the decoder per
         step, as cached decoding does), the cos/sin factor of max 64 /
         original 16; float32, one file.
Data: llm.c token shards written here, 8 training windows and 4 held-out
windows of 17 random ids (a tokens dataset is one stream cut into windows
of max_seq_len+1 starting every max_seq_len tokens, no document
boundaries). The recipe has no tokenizer section: the model folder's
tokenizer must be picked up, and its files copied into the export.

vktrain trains 4 AdamW steps (lr 1e-2 constant, global batch 8 = the
whole training set, shuffle off) from each folder and evaluates the
held-out windows after the last step. Checked:
  step-1 loss:  |vk - hf| / hf < 1e-5, hf = transformers' mean cross-entropy
                of the source model (loaded in float32, eval mode) on the 8
                training windows;
  val_loss:     |vk - hf| / hf < 1e-4, hf = the same of the EXPORTED model
                (AutoModelForCausalLM.from_pretrained(output_dir)) on the 4
                held-out windows; the exported weights must also have moved
                (the loss differs from the source model's by > 1e-3), so the
                check cannot pass on an unchanged copy;
  generate:     `vktrain generate --temperature 0` on the export prints the
                12 tokens of transformers' greedy decoding (argmax over the
                tokenizer's ids, stop at eos) after the prompt: the biases,
                rope scaling and GPT-2 positions in the key/value-cached
                decoder;
  tokenizer:    tokenizer.type=byte over the folder is refused at load;
  export:       config.json keeps model_type, rope settings and biases of
                the source, carries the tokenizer's bos/eos/pad ids and
                torch_dtype float32; AutoTokenizer.from_pretrained(output_dir)
                encodes a text as the source tokenizer does.
Both sides compute in float32 with different summation orders; the
forward alone agrees to ~1e-7 relative (tests/test_parity_torch.py), and
AdamW carries rounding into the weights over 4 steps, hence 1e-4 there.
A wrong convention (RoPE scaling regime, a bias, the GPT-2 position rows)
moves the loss by several 1e-4 or more: as controls, transformers' loss of the
llama without its rope_scaling, and of the qwen2 read as a llama (its
q/k/v biases dropped), must differ from vktrain's step-1 loss by > 1e-4 (seen: 7.8e-4, 2.4e-3)."""
import json
import os
import subprocess
import sys
import tempfile

import torch
import transformers

from transformers import (AutoModelForCausalLM, AutoTokenizer, Gemma2Config, GemmaConfig, GPT2Config, LlamaConfig,
                          LlamaForCausalLM, MistralConfig, Phi3Config, Qwen2Config)

from hf_oracle import MODEL_VOCAB, greedy, make_tokenizer, randomize
from shard_testing import fine_tune

VKTRAIN = os.environ["VKTRAIN"]
T, WINDOWS, VAL_WINDOWS, STEPS = 16, 8, 4, 4
failures = []
# Config overrides that drop one feature: the loss must then disagree.
CONTROLS = {"llama": [("without rope_scaling", {"rope_scaling": None})],
            "mistral_window": [("without its sliding window", {"sliding_window": None})],
            "phi3": [("without its longrope scaling", {"rope_scaling": None})],
            "gemma2": [("without its sliding window", {"sliding_window": 10000})],
            "gemma2_softcap": [("without the attention's soft-capping", {"attn_logit_softcapping": None}),
                               ("without the final soft-capping", {"final_logit_softcapping": None})],
            "qwen2": [("with q/k/v biases dropped (read as a llama)", {"cls": LlamaForCausalLM})]}


def check(name, ok, detail=""):
    print(("ok: " if ok else "FAIL: ") + name + (f"  ({detail})" if detail else ""))
    if not ok:
        failures.append(name)


def build(arch, d, tok, gen):
    ids = dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    common = dict(vocab_size=MODEL_VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64, **ids)
    if arch == "llama":
        cfg = LlamaConfig(**common, rope_theta=10.0, tie_word_embeddings=False, attention_bias=True, mlp_bias=True,
                          rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0, "original_max_position_embeddings": 32})
    elif arch == "qwen2":
        cfg = Qwen2Config(**common, tie_word_embeddings=True, use_sliding_window=False)
    elif arch == "mistral":
        cfg = MistralConfig(**common, head_dim=16, sliding_window=None, tie_word_embeddings=False)
    elif arch == "mistral_window":
        cfg = MistralConfig(**common, sliding_window=5, tie_word_embeddings=True)
    elif arch == "gemma":
        cfg = GemmaConfig(**common, head_dim=16, hidden_activation="gelu_pytorch_tanh", rope_theta=1000.0)
    elif arch == "gemma2":
        cfg = Gemma2Config(**common, head_dim=16, query_pre_attn_scalar=12, sliding_window=5,
                           attn_logit_softcapping=None, final_logit_softcapping=None, rope_theta=1000.0)
    elif arch == "gemma2_softcap":
        # caps near the scores' and logits' size, so that tanh bends them
        # (Gemma 2's 50 and 30 would hardly touch a tiny random model's)
        cfg = Gemma2Config(**common, head_dim=16, query_pre_attn_scalar=12, sliding_window=5,
                           attn_logit_softcapping=0.5, final_logit_softcapping=1.5, rope_theta=1000.0)
    elif arch == "phi3":
        cfg = Phi3Config(**common, tie_word_embeddings=False, original_max_position_embeddings=16,
                         rope_scaling={"type": "longrope", "short_factor": [1.0, 1.5, 2.5, 4.0],
                                       "long_factor": [2.0, 3.0, 5.0, 9.0]})
    else:
        cfg = GPT2Config(vocab_size=MODEL_VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, **ids)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    randomize(model, gen)
    if arch == "llama":
        model.to(torch.bfloat16).save_pretrained(d, max_shard_size="20KB")
    elif arch == "gpt2":
        model.to(torch.float16).save_pretrained(d)
    else:
        model.save_pretrained(d)
    tok.save_pretrained(d)


def hf_loss(folder, windows, control=None):
    control = dict(control or {})
    cls = control.pop("cls", AutoModelForCausalLM)
    model = cls.from_pretrained(folder, torch_dtype=torch.float32, attn_implementation="eager", **control)
    model.eval()
    x = torch.tensor(windows, dtype=torch.long)
    with torch.no_grad():
        logits = model(input_ids=x[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1)).item()


def check_generate(arch, folder, tok, n_new=12):
    """`vktrain generate --temperature 0` on the export prints the prompt and
    then the tokens of transformers' greedy decoding of the same folder
    (hf_oracle.greedy)."""
    prompt = "the quick brown"
    want, margin, n = greedy(folder, prompt, n_new)
    r = subprocess.run([VKTRAIN, "generate", "--model", folder, "--prompt", prompt, "--temperature", "0",
                        "--max-new-tokens", str(n_new)], capture_output=True)
    check(f"{arch}: vktrain generate prints transformers' greedy tokens ({n} tokens)",
          r.returncode == 0 and r.stdout == want,
          f"vk {r.stdout!r} hf {want!r}, smallest top-1 margin {margin:.3g} {r.stderr[-500:]!r}")


def run_case(arch, work, tok, gen):
    src, out = os.path.join(work, arch), os.path.join(work, arch + "-out")
    build(arch, src, tok, gen)
    n_tok = len(tok)
    stream = torch.randint(0, n_tok, (WINDOWS * T + 1,), generator=gen).tolist()
    val = torch.randint(0, n_tok, (VAL_WINDOWS * T + 1,), generator=gen).tolist()
    metrics = fine_tune(VKTRAIN, work, arch, src, out, stream, val, T, WINDOWS, STEPS)
    if metrics is None:
        check(f"{arch}: vktrain train exits 0", False)
        return
    train_windows = [stream[i * T:i * T + T + 1] for i in range(WINDOWS)]
    val_windows = [val[i * T:i * T + T + 1] for i in range(VAL_WINDOWS)]

    hf0 = hf_loss(src, train_windows)
    vk0 = next(m["loss"] for m in metrics if m["step"] == 1)
    rel = abs(vk0 - hf0) / hf0
    check(f"{arch}: step-1 loss equals transformers' on the same windows", rel < 1e-5,
          f"vk {vk0:.8f} hf {hf0:.8f} rel {rel:.2e}")
    # Teeth: the same model without the feature this case adds gives a loss
    # the check above would reject.
    for what, control in CONTROLS.get(arch, []):
        rel = abs(vk0 - hf_loss(src, train_windows, control)) / hf0
        check(f"{arch}: control: transformers {what} differs from vktrain by > 10x the tolerance", rel > 1e-4,
              f"rel {rel:.2e}")

    vkv = next(m["val_loss"] for m in metrics if m["step"] == STEPS and "val_loss" in m)
    hfv = hf_loss(out, val_windows)
    hf_src = hf_loss(src, val_windows)
    rel = abs(vkv - hfv) / hfv
    check(f"{arch}: transformers on the export gives vktrain's val_loss", rel < 1e-4,
          f"vk {vkv:.8f} hf {hfv:.8f} rel {rel:.2e}; source model {hf_src:.6f}")
    check(f"{arch}: training moved the weights", abs(hfv - hf_src) > 1e-3, f"{hf_src:.6f} -> {hfv:.6f}")

    check_generate(arch, out, tok)

    have, want = json.load(open(os.path.join(out, "config.json"))), json.load(open(os.path.join(src, "config.json")))
    same = [k for k in ("model_type", "rope_scaling", "rope_theta", "attention_bias", "mlp_bias", "n_positions",
                        "max_position_embeddings", "tie_word_embeddings", "num_key_value_heads", "sliding_window")
            if k in want]
    check(f"{arch}: config.json keeps the source's {', '.join(same)}", all(have.get(k) == want[k] for k in same))
    check(f"{arch}: config.json has the tokenizer's special ids and torch_dtype float32",
          (have.get("bos_token_id"), have.get("eos_token_id"), have.get("pad_token_id"), have.get("torch_dtype")) ==
          (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, "float32"), str(have.get("torch_dtype")))
    # The folder's tokenizer was used; a recipe naming another is refused.
    recipe = os.path.join(work, arch + ".yaml")  # fine_tune's
    r = subprocess.run([VKTRAIN, "train", "--config", recipe, "tokenizer.type=byte", f"output_dir={out}-byte"],
                       capture_output=True, text=True)
    check(f"{arch}: a byte tokenizer over a folder holding tokenizer.json is refused",
          r.returncode != 0 and "tokenizer.type: byte, but model.init_from holds" in r.stderr, r.stderr.strip()[-200:])
    back = AutoTokenizer.from_pretrained(out)
    text = "the lazy fox, 42 times"
    check(f"{arch}: AutoTokenizer loads the export and encodes as the source",
          back(text)["input_ids"] == tok(text)["input_ids"] and back.pad_token_id == tok.pad_token_id)


def main():
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    gen = torch.Generator().manual_seed(11)
    with tempfile.TemporaryDirectory() as work:
        tok = make_tokenizer(os.path.join(work, "tokenizer"))
        for arch in ("llama", "qwen2", "gpt2", "mistral", "mistral_window", "phi3", "gemma", "gemma2",
                     "gemma2_softcap"):
            run_case(arch, work, tok, gen)
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)


main()
