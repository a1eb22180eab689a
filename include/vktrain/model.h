/* model: the llama and gpt2 architectures assembled from ops.
 *
 * Owns one parameter table (Hugging Face name, shape, weight-decay flag,
 * init rule, value and gradient buffers) that init, load/save, the
 * optimizer and the tests all walk; the activation buffers, sized once for
 * batch_size x max_seq_len; and the recording of a whole forward (with the
 * masked cross-entropy) and backward for one micro-batch. It never submits
 * except where it reads results back (model_read_loss), and never knows
 * about ranks or files (a batch names its step and first sequence only as
 * the counter of LoRA dropout's mask).
 *
 * Linear weights are stored (out, in) internally for every architecture;
 * GPT-2's Conv1D tensors are (in, out) in Hugging Face files, and the
 * table's `hf_transposed` flag tells load/save to transpose them. */
#ifndef VKTRAIN_MODEL_H
#define VKTRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "vktrain/config.h"
#include "vktrain/gpu.h"
#include "vktrain/ops.h"
#include "vktrain/util.h"

enum model_arch { MODEL_LLAMA, MODEL_GPT2 };

struct model_config {
    enum model_arch arch;
    uint32_t vocab_size, dim, n_layers, n_heads, n_kv_heads, hidden_dim, max_seq_len;
    float norm_eps;
    double rope_theta;
    int tie_embeddings;
    float init_std;
    /* Keep only each layer's input (the residual stream) and one shared set
     * of the other activations; the backward of a layer recomputes its
     * forward first. Same gradients, bit for bit. */
    int activation_checkpointing;
    /* Rows per chunk of the LM head and cross-entropy; 0: as many as fit a
     * 128 MiB logits buffer and the device's binding and allocation limits
     * (tests set a few rows to run several chunks). */
    uint32_t head_rows;
    /* llama family: biases of q/k/v_proj (qwen2, llama attention_bias),
     * of o_proj (llama attention_bias), of gate/up/down_proj (mlp_bias). */
    int qkv_bias, o_bias, mlp_bias;
    struct op_rope_scaling rope_scaling;
    /* gpt2: rows of the position table, the checkpoint's n_positions,
     * which may exceed max_seq_len (only the first max_seq_len rows are
     * used); 0: max_seq_len. */
    uint32_t pos_rows;
    /* LoRA (docs/lora.md): lora_rank > 0 freezes every weight of the table
     * (no gradient buffers, no weight-gradient kernels) and adds, to each
     * linear layer a target names (PEFT's rule: the module's name, or a
     * suffix of it after a dot), A (rank, in) and B (out, rank), so that
     * y = W x + (lora_alpha / lora_rank) B (A x). Those adapters are then the
     * only trained parameters (model_param_count/model_param). */
    uint32_t lora_rank;
    float lora_alpha;
    /* Dropout on each adapter's input in training forwards (scale > 0;
     * docs/lora.md): its mask comes from the batch's seed, step and
     * sample0, the layer, the adapted linear layer, the position and the
     * feature, so it is the same for any split of the global batch. */
    float lora_dropout;
    int lora_n_targets;
    const char *const *lora_targets;
    /* model.base_dtype bf16 (needs lora_rank): the frozen linear weights,
     * the embedding tables (token and gpt2's positions; a tied LM head
     * reads the token table) and an untied LM head live on the device as
     * bf16, rounded to nearest even from what is uploaded; the matmuls and
     * the embedding kernels widen them. Norms and biases stay fp32. */
    int base_bf16;
    /* model.base_dtype nf4 (needs lora_rank): the frozen linear weights of
     * the layers (q/k/v/o and the MLP's; not the embeddings, an untied LM
     * head or norms, which stay as base_bf16 keeps them) live on the
     * device as NF4 in blocks of 64 (include/vktrain/quant4.h), quantized
     * from what is uploaded; base_nf4_double: with 8-bit absmax values.
     * The embeddings and an untied LM head are bf16 then. */
    int base_nf4, base_nf4_double;
    /* model.init_from is a bitsandbytes 4-bit folder (HF_BNB_NF4 or
     * HF_BNB_FP4; model_config_read sets base_nf4 and base_nf4_double from
     * it): the layers' matrices are uploaded as the folder stores them
     * (model_load), not quantized here, and are frozen even without LoRA
     * (generate). */
    int base_bnb4;
    /* llama family: each head's width (0: dim / n_heads); q_proj is
     * (n_heads x head_dim, dim), o_proj (dim, n_heads x head_dim). */
    uint32_t head_dim;
    /* llama family: RMSNorm (weight of head_dim, norm_eps) over each head
     * of q and k after their projections, before RoPE (Qwen3's q_norm and
     * k_norm). */
    int qk_norm;
    /* Sliding-window attention: query t sees the keys t' <= t with
     * t − t' < sliding_window (Mistral's, Qwen2's, Qwen3's and SmolLM3's
     * sliding_window); 0: the whole causal row. Every layer has it except
     * those in full_layers (transformers' layer_types "full_attention"). */
    uint32_t sliding_window;
    struct vkt_layers full_layers;
    /* llama family: the layers without RoPE (SmolLM3's no_rope_layers 0):
     * q and k enter attention as projected (and normed). */
    struct vkt_layers nope_layers;
    /* llama family: the rotated dimensions of each head (partial rotary:
     * head_dim x partial_rotary_factor, Phi-4-mini's); 0: the whole head. */
    uint32_t rotary_dim;
    /* llama family: q/k/v_proj held in the files as one qkv_proj, gate/up_proj
     * as gate_up_proj (phi3; model_param's hf); LoRA adapts each fused one. */
    int fused_proj;
    /* The Gemma family's choices (llama family):
     * norm_offset: every RMSNorm weight w acts as 1 + w (Gemma's, zeros at
     *   init), the final norm and q/k norms included;
     * post_norms: RMSNorms on the attention's and the MLP's outputs before
     *   their residual adds (Gemma 2/3: post_attention_layernorm,
     *   post_feedforward_layernorm; the MLP's input norm is then
     *   pre_feedforward_layernorm);
     * mlp_gelu: GeGLU with the tanh GELU, down(gelu(gate)·up), not SwiGLU;
     * embed_scale: the embeddings times it (Gemma: √dim in float); 0: 1;
     * attn_scalar: scores times attn_scalar^-1/2 (query_pre_attn_scalar);
     *   0: head_dim's;
     * rope_local_theta: the RoPE base of the layers that have the window
     *   (Gemma 3's rope_local_base_freq, without rope_scaling); 0: one base. */
    int norm_offset, post_norms, mlp_gelu;
    float embed_scale, attn_scalar;
    double rope_local_theta;
    /* Gemma 2's soft-capping, x -> c·tanh(x/c), of the attention scores
     * (attn_softcap) and of the logits (final_softcap); 0: none. */
    float attn_softcap, final_softcap;
};

/* Each head's width. */
static inline uint32_t model_head_dim(const struct model_config *c)
{
    return c->head_dim ? c->head_dim : c->dim / c->n_heads;
}

/* The dimensions of each head that RoPE rotates (the first ones). */
static inline uint32_t model_rotary_dim(const struct model_config *c)
{
    return c->rotary_dim ? c->rotary_dim : model_head_dim(c);
}

/* Layer l's attention window (0: the whole causal row). */
static inline uint32_t model_layer_window(const struct model_config *c, uint32_t l)
{
    return vkt_layers_has(&c->full_layers, l) ? 0 : c->sliding_window;
}

/* What q is multiplied by before attention so that the attention's
 * head_dim^-1/2 makes attn_scalar^-1/2: √(head_dim / attn_scalar), in
 * float (1: no query_pre_attn_scalar, or one equal to head_dim). */
float model_query_scale(const struct model_config *c);

/* Whether layer l attends through the window (a sliding layer: not in
 * full_layers), whatever the window's length. */
static inline int model_layer_sliding(const struct model_config *c, uint32_t l)
{
    return (c->sliding_window || c->rope_local_theta) && !vkt_layers_has(&c->full_layers, l);
}

/* Whether layer l rotates q and k (llama family). */
static inline int model_layer_rope(const struct model_config *c, uint32_t l)
{
    return c->arch == MODEL_LLAMA && !vkt_layers_has(&c->nope_layers, l);
}

/* INIT_LORA_A: uniform in ±1/sqrt(in), what PEFT's kaiming_uniform_(a=√5) gives. */
enum model_init { INIT_NORMAL, INIT_ONES, INIT_ZEROS, INIT_LORA_A };

struct model_param {
    char name[96]; /* Hugging Face name (of the split tensor, for a part of a fused one) */
    /* The tensor of Hugging Face files that holds it: hf itself, or rows
     * [hf_row0, hf_row0 + shape[0]) of hf's hf_rows (phi3's qkv_proj and
     * gate_up_proj, and their LoRA B, are fused tensors of consecutive
     * parameters: q, k, v; gate, up). */
    char hf[96];
    uint32_t hf_row0, hf_rows;
    int ndim;
    uint32_t shape[2]; /* internal shape: linear weights (out, in) */
    size_t numel;
    int decay;         /* weight decay applies (ndim >= 2) */
    int hf_transposed; /* stored (in, out) in HF files (GPT-2 Conv1D) */
    enum model_init init;
    int stage;                   /* its gradient is complete after this backward stage */
    int adapter;                 /* a LoRA A or B: named as PEFT saves it, not part of the model's files */
    int bf16;                    /* w holds bf16 (a frozen weight with base_bf16): read it with model_param_download */
    int q4;                      /* w holds NF4 (a frozen layer matrix with base_nf4, include/vktrain/quant4.h) */
    struct gpu_buffer *w, *grad; /* grad NULL: frozen (LoRA's base), or a weights-only model */
};

/* One micro-batch on the host: B sequences of T tokens (row-major B x T).
 * positions restart per packed document; doc_ids NULL = one document per
 * sequence; labels use -100 for positions that do not enter the loss.
 * LoRA dropout's counter: the run's seed, the step, and the index of the
 * first sequence in the step's global batch (sampler_first). */
struct model_batch {
    uint32_t B, T;
    const int32_t *tokens, *labels, *positions, *doc_ids;
    uint64_t seed;
    int64_t step;
    uint32_t sample0;
};

struct model;

/* The model of a recipe's model section; with init_from, its config.json
 * adds what the recipe has no keys for (biases, rope_scaling) and GPT-2's
 * position rows. 0, or -1 when that config.json cannot be read. */
int model_config_from(const struct config_model *c, struct model_config *mc, char *err, size_t errlen);

/* The largest tensor (weight or activation) and the most layers a model
 * may have: with these, the bytes of all the buffers of a model and its
 * optimizer sum to less than 2^63, so no size computed from a config can
 * overflow (the memory plan adds them up; docs/training.md, "Memory"). */
#define MODEL_MAX_TENSOR ((uint64_t)1 << 38)
#define MODEL_MAX_LAYERS VKT_MAX_LAYERS

/* What model_create requires of c for batch rows of max_seq_len tokens
 * (batch 0: weights only): positive sizes that divide as the architecture
 * needs, options the architecture has, and each product of sizes that sizes a buffer (vocab_size x dim,
 * batch_size x max_seq_len x hidden_dim, ...) within MODEL_MAX_TENSOR
 * elements, with batch x max_seq_len rows below 2^31. Returns 0, or -1 with
 * a message naming the sizes. */
int model_config_check(const struct model_config *c, uint32_t batch, char *err, size_t errlen);

/* Checks the config (fatal with the reason) and allocates parameters,
 * gradients and activations for up to batch x max_seq_len tokens; batch 0
 * allocates the weights alone (generation: no gradients, no forward or
 * backward of batches). */
struct model *model_create(struct gpu *g, const struct model_config *c, uint32_t batch);
void model_destroy(struct model *m);
const struct model_config *model_config(const struct model *m);
/* The trained parameters: every tensor of the table, or with LoRA the
 * adapters alone (what the optimizer, the gradient sync and checkpoints
 * walk). */
int model_param_count(const struct model *m);
struct model_param *model_param(struct model *m, int i);
/* The whole table, base and adapters. */
int model_tensor_count(const struct model *m);
struct model_param *model_tensor(struct model *m, int i);
/* Any tensor of the table by name (adapters by their PEFT name). */
struct model_param *model_param_find(struct model *m, const char *hf_name);
/* The parameter that is tensor hf_name of the files, or its first part (the
 * others follow it in the table, with the same hf). */
struct model_param *model_param_find_hf(struct model *m, const char *hf_name);
size_t model_numel(const struct model *m); /* the whole table */
size_t model_trained_numel(const struct model *m);

/* A tensor's values to and from the host as numel floats, converting where
 * it is stored as bf16 (the upload rounds to nearest even, so a bf16
 * checkpoint's values arrive exactly; the download widens exactly). */
void model_param_upload(struct model *m, struct model_param *p, const float *host);
void model_param_download(struct model *m, const struct model_param *p, float *host);

/* normal(0, init_std) for matrices and embeddings, ones for norm weights,
 * zeros for biases and LoRA's B, INIT_LORA_A for LoRA's A, from a generator seeded by (seed, parameter name): the
 * same weights on every device and every world size. */
void model_init_random(struct model *m, uint64_t seed);
/* The same for the LoRA adapters alone (over a loaded base). */
void model_init_adapters(struct model *m, uint64_t seed);
void model_zero_grad(struct model *m);

/* Records the forward and the fused cross-entropy of one micro-batch with
 * dlogits scaled by `scale` (the step passes 1/N). Uploads the batch. The
 * LM head runs over chunks of rows (no rows x V logits exist at once), and
 * unless scale is 0 (evaluation: no backward may follow) each chunk's
 * head backward runs at once: the head's weight gradient accumulates over
 * chunks. */
void model_forward(struct model *m, const struct model_batch *b, float scale);
/* Records the backward of the last forward, accumulating into gradients. */
void model_backward(struct model *m);
/* The same backward in stages, so gradients that are complete can be sent
 * while the rest runs: stage 0 is the head (final norm; the untied LM
 * head's gradient is complete after the forward),
 * stage 1 + i is layer n_layers − 1 − i, the last stage the embeddings.
 * model_backward records every stage in order. */
int model_backward_stages(const struct model *m);
void model_backward_stage(struct model *m, int stage);
/* Each forward adds its micro-batch's loss sum and valid-token count to a
 * device-side accumulator (deterministic reductions, in micro-batch order);
 * model_loss_reset zeroes it, model_read_loss submits and reads it. */
void model_loss_reset(struct model *m);
void model_read_loss(struct model *m, double *loss_sum, double *count);
/* Each sequence's (loss sum, valid count) of the last forward: loss[b]
 * and count[b] for b < B, the reproducible sum (repro_rowsum) over its T
 * rows. What the reproducible step reads per sample
 * (src/repro/repro_step.c). */
void model_sample_losses(struct model *m, struct gpu_buffer *loss, struct gpu_buffer *count);
/* With tied embeddings, where the LM head's share of the table's gradient
 * goes: g (vocab_size x dim floats) instead of the table's gradient, so the
 * reproducible step sums it over samples on its own; NULL: the table's. */
void model_set_head_grad(struct model *m, struct gpu_buffer *g);
/* The parameter index of the embedding table the LM head shares, or -1. */
int model_tied_table(const struct model *m);
/* With keep set, each forward copies each chunk's logits, before the
 * cross-entropy turns them into gradients, into a rows x V buffer that
 * model_read_logits returns. For tests: it costs the rows x V floats that
 * the chunks avoid. */
void model_keep_logits(struct model *m, int keep);
void model_read_logits(struct model *m, float *out);
/* Bytes of the activation buffers allocated so far (saved activations,
 * backward scratch, the logits chunk, the matmul tn scratch, batch
 * inputs). */
size_t model_activation_bytes(const struct model *m);
/* Rows of a logits chunk of the LM head (model_config.head_rows, or what
 * its budget allows), 0 for a model without activations. */
uint32_t model_head_rows(const struct model *m);

/* How model_save writes a model folder. */
struct model_save_options {
    const char *source_config; /* a config.json to copy (the init_from model's), or NULL: write one */
    int bos, eos, pad;         /* special ids put in config.json; -1: none */
    int bf16;                  /* tensors in BF16, torch_dtype bfloat16 (else F32, float32) */
    size_t shard_bytes;        /* 0: one file; else shards of at most this (a larger tensor alone) */
    int merged;                /* LoRA: W + (alpha/rank)·B·A for each adapted weight */
};

/* Hugging Face files in dir: model.safetensors (HF names and shapes,
 * GPT-2 Conv1D weights (in, out); no lm_head when tied), or, when it
 * exceeds shard_bytes, model-0000i-of-0000n.safetensors shards with
 * model.safetensors.index.json; and config.json; each written atomically.
 * opts NULL: F32, one file, a fresh config.json without special ids.
 * Returns 0, or -1 with a message in err. */
int model_save(struct model *m, const char *dir, const struct model_save_options *opts, char *err, size_t errlen);
/* Reads dir/model.safetensors, or the shards that
 * dir/model.safetensors.index.json maps, into the parameters
 * (F32/F16/BF16). Every parameter must be present once with its HF shape;
 * GPT-2 names may carry the "transformer." prefix; the buffers attn.bias,
 * attn.masked_bias and rotary_emb.inv_freq, and a tied model's
 * lm_head.weight, are ignored; anything else unknown is an error. */
int model_load(struct model *m, const char *dir, char *err, size_t errlen);
/* LoRA's files in dir, in PEFT's format: adapter_model.safetensors (the
 * adapters, F32, PEFT's names and shapes) and adapter_config.json (r,
 * lora_alpha, target_modules; fan_in_fan_out for gpt2's Conv1D;
 * base_model_name_or_path: base, or null). */
int model_adapter_save(struct model *m, const char *dir, const char *base, char *err, size_t errlen);
/* Reads dir/adapter_model.safetensors into the adapters: every adapter
 * present once with its shape, nothing else. */
int model_adapter_load(struct model *m, const char *dir, char *err, size_t errlen);
/* The model config a Hugging Face config.json describes. */
int model_config_read(const char *dir, struct model_config *c, char *err, size_t errlen);

#endif
