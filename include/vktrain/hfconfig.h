/* hfconfig: the Hugging Face config.json of a model, read and written.
 *
 * Two architectures: LlamaForCausalLM ("llama") and GPT2LMHeadModel
 * ("gpt2"), with the key names the published checkpoints use. Reading fills
 * missing optional keys with the transformers defaults and rejects settings
 * the trainer does not implement (other activations, biases in llama,
 * rope_scaling). Never prints, never exits: errors come back as -1 and a
 * message naming the file and the key. Knows nothing of tensors. */
#ifndef VKTRAIN_HFCONFIG_H
#define VKTRAIN_HFCONFIG_H

#include <stddef.h>

enum hf_arch { HF_LLAMA, HF_GPT2 };

struct hf_config {
    enum hf_arch arch;
    int vocab_size, dim, n_layers, n_heads, n_kv_heads, hidden_dim, max_seq_len;
    double norm_eps;   /* rms_norm_eps / layer_norm_epsilon */
    double rope_theta; /* llama only; 0 for gpt2 */
    int tie_embeddings;
    int bos_token_id, eos_token_id, pad_token_id; /* -1: absent */
};

/* Returns 0 or -1 with a message naming path and the key. */
int hf_config_read(const char *path, struct hf_config *c, char *err, size_t errlen);
/* Writes atomically (ckpt_write_atomic). Token ids < 0 are left out. */
int hf_config_write(const char *path, const struct hf_config *c, char *err, size_t errlen);

#endif
