"""tutorial_model: writes the tiny model folder that tests/test_tutorial.sh
runs docs/tutorial.md's commands on, as a Hugging Face model folder of the
Llama 3.2 Instruct kind would be:

    tutorial_model.py DIR

transformers==4.44.2 (the venv of scripts/deps.sh test) saves a random
LlamaForCausalLM (hidden 64, 2 layers, 4 heads, 2 key/value heads, MLP 128,
untied head, 512 positions, transformers' own initialization) with
save_pretrained, and beside it a small byte-level BPE tokenizer of the
Llama 3 family (the builder of chat_template_parity.py: Llama 3's split
regex, ignore_merges, its special tokens) whose tokenizer_config.json holds
Llama 3.2 Instruct's chat template, bos <|begin_of_text|> and eos
<|eot_id|>; generation_config.json stops at <|eot_id|> and <|end_of_text|>,
as Llama 3.2 Instruct's does.
"""
import os
import random
import sys

import torch
from transformers import AutoModelForCausalLM, LlamaConfig

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chat_template_parity as ct  # noqa: E402  (loads transformers' tokenizer side only)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    tok = ct.llama3_tokenizer(random.Random(9))
    ct.write_folder(d, tok, ct.LLAMA32, {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})
    ids = {t["content"]: t["id"] for t in tok["added_tokens"]}
    n = max(tok["model"]["vocab"].values()) + 1
    cfg = LlamaConfig(vocab_size=(n + 63) // 64 * 64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      tie_word_embeddings=False, bos_token_id=ids["<|begin_of_text|>"],
                      eos_token_id=[ids["<|eot_id|>"], ids["<|end_of_text|>"]])
    torch.manual_seed(9)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(d)
    print(f"tutorial_model: wrote {d} (vocab {cfg.vocab_size}, tokenizer {n} ids)")


if __name__ == "__main__":
    main()
