/* hfconfig: the Hugging Face config.json of a model, read and written.
 *
 * Two architectures: the llama family (model_type llama, qwen2 = llama
 * with q/k/v biases, mistral = llama, qwen3 = llama with RMSNorm on each
 * head of q and k and its own head_dim, smollm3 = llama with layers
 * without RoPE, phi3 = llama with fused projections, partial rotary and
 * longrope; windows on every layer or on some) and GPT2LMHeadModel
 * ("gpt2"), with the key names the published checkpoints use. Reading
 * fills missing optional keys with the transformers defaults of the
 * model_type and rejects, naming the key, every setting that would change
 * the math and that the trainer does not implement (other activations,
 * rope_scaling types other than linear, llama3 and longrope, layer types
 * other than full and sliding attention, GPT-2's unscaled or layer-scaled
 * attention, cross-attention); keys that do not change the math
 * (use_cache, dropout rates: vktrain trains without dropout,
 * initializer_range, ...) are ignored. Never prints, never exits: errors
 * come back as -1 and a message naming the file and the key. Knows
 * nothing of tensors. */
#ifndef VKTRAIN_HFCONFIG_H
#define VKTRAIN_HFCONFIG_H

#include <stddef.h>

#include "vktrain/util.h"

enum hf_arch { HF_LLAMA, HF_GPT2 };

struct hf_config {
    enum hf_arch arch;
    int vocab_size, dim, n_layers, n_heads, n_kv_heads, hidden_dim, max_seq_len;
    double norm_eps;   /* rms_norm_eps / layer_norm_epsilon */
    double rope_theta; /* llama only; 0 for gpt2 */
    int tie_embeddings;
    int bos_token_id, eos_token_id, pad_token_id; /* -1: absent */
    /* llama family: biases of q/k/v_proj (qwen2; llama attention_bias), of
     * o_proj (llama attention_bias), of the MLP (llama mlp_bias). */
    int qkv_bias, o_bias, mlp_bias;
    /* rope_scaling: 0 none, 1 linear, 2 llama3, 3 longrope (op_rope_type's values). */
    int rope_scaling;
    double rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_max; /* original_max_position_embeddings */
    char model_type[16];   /* llama, qwen2, qwen3, mistral, smollm3, phi3, gemma, gemma2, gemma3_text, gpt2 */
    int save_bf16;         /* write: torch_dtype bfloat16 instead of float32 */
    int head_dim; /* each head's width: head_dim, else hidden_size / num_attention_heads */
    int qk_norm;  /* qwen3: RMSNorm over each head of q and k (q_norm, k_norm) before RoPE */
    /* sliding_window (mistral's; qwen2's, qwen3's and smollm3's with
     * use_sliding_window) when shorter than max_position_embeddings (query
     * t sees keys t' with t − t' < it), else 0: none. */
    int sliding_window;
    /* With a window, the layers that attend globally: layer_types'
     * "full_attention", or qwen2's and qwen3's first max_window_layers. */
    struct vkt_layers full_layers;
    /* smollm3: the layers without RoPE (no_rope_layers 0). */
    struct vkt_layers nope_layers;
    /* phi3: q/k/v_proj stored as one qkv_proj (rows q, k, v) and
     * gate/up_proj as gate_up_proj (rows gate, up). */
    int fused_proj;
    /* The rotated dimensions of a head: head_dim x partial_rotary_factor
     * (phi3); 0: the whole head. */
    int rotary_dim;
    /* rope_scaling 3, longrope: one factor per rotated pair, and the cos/sin
     * factor (attention_factor, else transformers' default from
     * max_position_embeddings / original_max_position_embeddings). */
    double rope_short[128], rope_long[128], rope_attention;
    /* The Gemma family (gemma, gemma2, gemma3_text): RMSNorm weights used as
     * 1 + w; norms after attention and after the MLP too (gemma2, gemma3);
     * GeGLU with the tanh GELU; embeddings times √hidden_size; scores times
     * query_pre_attn_scalar^-1/2 (0: head_dim's); gemma3's RoPE base of
     * the sliding layers (rope_local_base_freq, without rope_scaling; 0:
     * rope_theta). */
    int norm_offset, post_norms, mlp_gelu;
    double embed_scale, attn_scalar, rope_local_theta;
    /* Gemma 2 / 3: attn_logit_softcapping, final_logit_softcapping (0: none). */
    double attn_softcap, final_softcap;
    /* A multimodal gemma3 folder (Gemma 3 4B and larger): these keys are
     * its text_config's (a gemma3_text), its text model's tensors are
     * under language_model. (model.language_model. in later transformers)
     * and the vision tower's are not read. */
    int multimodal;
    /* A bitsandbytes 4-bit folder (quantization_config, load_in_4bit): its
     * layers' linear weights are stored quantized (HF_BNB_NF4 or
     * HF_BNB_FP4, bnb4_double: with 8-bit absmax values), as uint8
     * tensors with their quantization state beside them. 0: full
     * precision. */
    int bnb4, bnb4_double;
};
enum { HF_BNB_NF4 = 1, HF_BNB_FP4 = 2 };

/* Returns 0 or -1 with a message naming path and the key. */
int hf_config_read(const char *path, struct hf_config *c, char *err, size_t errlen);
/* Writes atomically (ckpt_write_atomic). Token ids < 0 are left out. */
int hf_config_write(const char *path, const struct hf_config *c, char *err, size_t errlen);
/* Writes a copy of the config.json at source (the model trained from),
 * faithful to it key for key, with c's token ids (those >= 0) and
 * torch_dtype put in; atomically. A multimodal gemma3 source gives its
 * text_config, as a gemma3_text (Gemma3ForCausalLM). */
int hf_config_write_from(const char *path, const char *source, const struct hf_config *c, char *err, size_t errlen);

#endif
