"""hf_families_parity: vktrain against the modeling code of transformers
releases newer than the pinned 4.44.2, for what it lacks,
run by test_hf_families.sh: Qwen3, Qwen3 and Qwen2 with a sliding window
on one of their layers (transformers 4.44.2's eager Qwen2 has no window),
SmolLM3 with a layer without RoPE, a Phi-3 of Phi-4-mini's kind (partial
rotary over half of each head, longrope, tied, and a window: 4.44.2's Phi3
has neither partial rotary nor an eager window), Gemma 3's text model, and
the same inside a multimodal gemma3 folder (a tiny SigLIP vision tower
beside it: vktrain trains the text model and exports it as gemma3_text).

The oracle, tests/hf_oracle.py, runs inside the Debian unstable tree of
scripts/sid.sh (chroot: its python3-torch and transformers 4.57.1, the
pins of sid.sh), over a work folder inside the tree; vktrain runs here on
the same folders. Per family, hf_oracle builds a byte-level BPE tokenizer
and a tiny random model (vocab 320, hidden 32, 2 layers, 4 heads of 16 with
2 kv heads, MLP 64, tied, every parameter random, float32), and:
  step-1 loss:  |vk - hf| / hf < 1e-5 over 8 training windows of 17 ids,
                hf = transformers' mean cross-entropy of the source model;
  control:      transformers' loss of the model with its family's feature
                taken out (Qwen3: the per-head q/k norms; the windows; SmolLM3's
                layer without RoPE given RoPE; Phi-3's partial rotary) differs from
                vktrain's by > 1e-4, so the check above has teeth;
  val_loss:     after 4 AdamW steps, |vk - hf| / hf < 1e-4 with hf the
                loss of the EXPORTED folder on 4 held-out windows, and the
                weights moved (> 1e-3 from the source model's);
  generate:     `vktrain generate --temperature 0` on the export prints
                transformers' greedy decoding (12 tokens);
  export:       config.json keeps model_type, head_dim and the tie; the
                exported tokenizer encodes as the source.
Tolerances as in hf_transformers_parity.py (float32 on both sides, sums in
other orders, AdamW's rounding over 4 steps)."""
import json
import os
import random
import subprocess
import sys

from shard_testing import fine_tune
from sid_oracle import Oracle, check, failures, tree_root

SRC = os.environ["SRC"]
VKTRAIN = os.environ["VKTRAIN"]
T, WINDOWS, VAL_WINDOWS, STEPS = 16, 8, 4, 4
FAMILIES = {"qwen3": [("without its q/k norms", "no_qk_norm")],
            "qwen3_window": [("without the window", "no_window")],
            "qwen2_window": [("without the window", "no_window")],
            "smollm3": [("with RoPE on every layer", "rope_everywhere")],
            "gemma3": [("without the window", "no_window"),
                       ("with the global RoPE base on the local layers too", "one_rope_base")],
            "gemma3_mm": [("with the global RoPE base on the local layers too", "one_rope_base")],
            "phi3_partial": [("without the window", "no_window"),
                             ("with RoPE over whole heads (no partial rotary, no longrope)", "full_rotary")]}


def safetensors_names(folder):
    """The tensor names of a folder's safetensors files (their headers)."""
    import struct
    names = []
    for f in sorted(os.listdir(folder)):
        if f.endswith(".safetensors"):
            with open(os.path.join(folder, f), "rb") as fp:
                n = struct.unpack("<Q", fp.read(8))[0]
                names += [k for k in json.loads(fp.read(n)) if k != "__metadata__"]
    return names


def run_family(oracle, arch, seed):
    src, src_in = oracle.path(arch)
    out, out_in = oracle.path(arch + "-out")
    rng = random.Random(seed)
    built = oracle.ask([{"op": "build", "arch": arch, "dir": src_in, "seed": seed}])[0]
    print(f"{arch}: transformers {built['transformers']}, torch {built['torch']}")
    n_tok = built["n_tok"]
    stream = [rng.randrange(n_tok) for _ in range(WINDOWS * T + 1)]
    val = [rng.randrange(n_tok) for _ in range(VAL_WINDOWS * T + 1)]
    train_windows = [stream[i * T:i * T + T + 1] for i in range(WINDOWS)]
    val_windows = [val[i * T:i * T + T + 1] for i in range(VAL_WINDOWS)]
    controls = FAMILIES[arch]
    hf0, hf_src, *hf_ctl = oracle.ask([{"op": "loss", "dir": src_in, "windows": train_windows},
                                       {"op": "loss", "dir": src_in, "windows": val_windows}] +
                                      [{"op": "loss", "dir": src_in, "windows": train_windows, "control": control}
                                       for _, control in controls])

    metrics = fine_tune(VKTRAIN, oracle.host, arch, src, out, stream, val, T, WINDOWS, STEPS)
    if metrics is None:
        check(f"{arch}: vktrain train exits 0", False)
        return
    vk0 = next(m["loss"] for m in metrics if m["step"] == 1)
    rel = abs(vk0 - hf0) / hf0
    check(f"{arch}: step-1 loss equals transformers' on the same windows", rel < 1e-5,
          f"vk {vk0:.8f} hf {hf0:.8f} rel {rel:.2e}")
    for (what, _), ctl in zip(controls, hf_ctl):
        rel = abs(vk0 - ctl) / hf0
        check(f"{arch}: control: transformers {what} differs from vktrain by > 10x the tolerance", rel > 1e-4,
              f"rel {rel:.2e}")

    text = "the lazy fox, 42 times"
    hfv, gen, enc_src, enc_out = oracle.ask([{"op": "loss", "dir": out_in, "windows": val_windows},
                                             {"op": "greedy", "dir": out_in, "prompt": "the quick brown", "n": 12},
                                             {"op": "encode", "dir": src_in, "text": text},
                                             {"op": "encode", "dir": out_in, "text": text}])
    vkv = next(m["val_loss"] for m in metrics if m["step"] == STEPS and "val_loss" in m)
    rel = abs(vkv - hfv) / hfv
    check(f"{arch}: transformers on the export gives vktrain's val_loss", rel < 1e-4,
          f"vk {vkv:.8f} hf {hfv:.8f} rel {rel:.2e}; source model {hf_src:.6f}")
    check(f"{arch}: training moved the weights", abs(hfv - hf_src) > 1e-3, f"{hf_src:.6f} -> {hfv:.6f}")

    want = bytes.fromhex(gen["want"])
    r = subprocess.run([VKTRAIN, "generate", "--model", out, "--prompt", "the quick brown", "--temperature", "0",
                        "--max-new-tokens", "12"], capture_output=True)
    check(f"{arch}: vktrain generate prints transformers' greedy tokens ({gen['n']} tokens)",
          r.returncode == 0 and r.stdout == want,
          f"vk {r.stdout!r} hf {want!r}, smallest top-1 margin {gen['margin']:.3g} {r.stderr[-500:]!r}")

    have, src_cfg = json.load(open(os.path.join(out, "config.json"))), json.load(open(os.path.join(src, "config.json")))
    if src_cfg.get("model_type") == "gemma3":  # multimodal: the text model is exported, as gemma3_text
        check(f"{arch}: the source is a multimodal gemma3 folder with a vision tower",
              "vision_config" in src_cfg and any("vision_tower" in k for k in safetensors_names(src)))
        src_cfg = src_cfg["text_config"]
    same = [k for k in ("model_type", "head_dim", "tie_word_embeddings", "num_key_value_heads") if k in src_cfg]
    check(f"{arch}: config.json keeps the source's {', '.join(same)}", all(have.get(k) == src_cfg[k] for k in same))
    check(f"{arch}: the exported tokenizer encodes as the source", enc_src == enc_out, f"{enc_src} {enc_out}")


def main():
    oracle = Oracle(tree_root())
    try:
        only = os.environ.get("FAMILIES", "").split(",")  # a subset, by name, when debugging
        for i, arch in enumerate(FAMILIES):
            if only == [""] or arch in only:
                run_family(oracle, arch, 11 + i)
    finally:
        oracle.close()
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print(f"{len(FAMILIES)} famil{'y' if len(FAMILIES) == 1 else 'ies'}: every check passed")


main()
