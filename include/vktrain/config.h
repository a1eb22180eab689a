/* config: the recipe. A YAML file plus `key.sub=value` overrides become one
 * typed, validated struct config with every default resolved (the keys and
 * their defaults: docs/recipes.md).
 *
 * Loading never prints and never exits: on error it returns -1 and writes a
 * message naming the key and where it was set (`file:line:column`, or the
 * override) into the caller's buffer; the CLI prints it. The struct is plain
 * data; config_free releases its strings. */
#ifndef VKTRAIN_CONFIG_H
#define VKTRAIN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum config_arch { ARCH_LLAMA, ARCH_GPT2 };
enum tokenizer_type { TOKENIZER_BYTE, TOKENIZER_HF };
/* How sft_jsonl `messages` become text (include/vktrain/chat_template.h). */
enum chat_template { CHAT_AUTO, CHAT_LLAMA3, CHAT_CHATML, CHAT_LLAMA2, CHAT_PLAIN, CHAT_GEMMA, CHAT_QWEN3, CHAT_PHI3 };
enum dataset_type { DATASET_TEXT, DATASET_SFT_JSONL, DATASET_TOKENS };
enum lr_schedule { LR_CONSTANT, LR_COSINE, LR_LINEAR };
enum nan_policy { NAN_STOP, NAN_SKIP };
enum save_dtype { SAVE_FP32, SAVE_BF16 };
enum base_dtype { BASE_FP32, BASE_BF16, BASE_NF4 };
enum mlp_activation { MLP_SILU, MLP_GELU_TANH }; /* SwiGLU, GeGLU (gelu_pytorch_tanh) */
/* reproducible: the same bits on every device and split
 * (docs/reproducible.md); bf16: the matmuls' inputs rounded to bf16 on the
 * device's cooperative matrices, fp32 accumulators, master weights and
 * optimizer (docs/devices.md, "Cooperative matrices"). */
enum precision { PRECISION_FP32, PRECISION_REPRODUCIBLE, PRECISION_BF16 };

struct config_model {
    enum config_arch arch;
    int vocab_size; /* >= the tokenizer's size */
    int dim;
    int n_layers;
    int n_heads;
    int n_kv_heads;
    int head_dim;    /* 0: dim / n_heads; else the width of each head (q is n_heads x head_dim wide) */
    bool qk_norm;    /* RMSNorm over each head of q and k before RoPE (Qwen3) */
    int sliding_window; /* 0: none; else query t sees keys t' with t − t' < sliding_window */
    /* Per layer, as transformers' config.json writes them (empty: every
     * layer alike): "sliding_attention" or "full_attention" (a full layer
     * ignores sliding_window), and no_rope_layers' "1" (RoPE) or "0" (none). */
    char **layer_types;
    int n_layer_types;
    char **no_rope_layers;
    int n_no_rope_layers;
    double partial_rotary_factor; /* RoPE on the first int(head size x it) of each head (Phi-4-mini's 0.75) */
    /* Not a key: phi3's layout in files (fused qkv_proj, gate_up_proj), from
     * init_from's model_type, or for partial rotary from scratch. */
    bool fused_proj;
    /* The Gemma family's (docs/recipes.md): the MLP's activation, RMSNorm
     * weights as 1 + w, norms after attention and MLP, embeddings times
     * √dim, scores times query_pre_attn_scalar^-1/2 (0: head_dim), the
     * sliding layers' RoPE base (0: rope_theta), Gemma 2's soft-capping of
     * the attention scores and of the final logits (0: none). */
    enum mlp_activation mlp_activation;
    bool norm_offset, post_norms, scale_embeddings;
    double query_pre_attn_scalar, rope_local_base_freq, attn_logit_softcapping, final_logit_softcapping;
    int hidden_dim;  /* MLP width */
    int max_seq_len; /* T: tokens per training row */
    double norm_eps;
    double rope_theta;
    bool tie_embeddings;
    double init_std;
    char *init_from; /* NULL: random init */
    bool activation_checkpointing;
    enum base_dtype base_dtype; /* bf16, nf4: LoRA's frozen base weights stored in bf16, or 4-bit NF4 */
    bool nf4_double_quant;      /* nf4: the absmax values in 8 bits too (bitsandbytes' double quantization) */
};

struct config_tokenizer {
    enum tokenizer_type type;
    char *path; /* tokenizer.json for hf; NULL for byte */
    enum chat_template chat_template; /* auto: tokenizer_config.json's, else plain */
};

struct config_dataset {
    enum dataset_type type;
    char *path;
    bool packed;
    bool train_on_input;
    bool shuffle;
    char *separator; /* text: a line holding only this splits documents */
    char *val_path;
    double val_fraction;
    bool skip_bad_lines; /* sft_jsonl: skip and count malformed lines */
    char **exclude;      /* directory entries matching these are skipped */
    int n_exclude;
};

struct config_optimizer {
    double lr;
    double betas[2];
    double eps;
    double weight_decay;
};

struct config_lr_scheduler {
    enum lr_schedule type;
    int64_t warmup_steps;
    double min_lr_ratio;
};

struct config_dist {
    int bucket_mb;       /* gradient all-reduce bucket size */
    int64_t check_every; /* steps between cross-rank consistency checks */
    bool overlap;        /* start each bucket's all-reduce while backward runs */
    int zero;            /* 1: AdamW state and update sharded over ranks (ZeRO-1) */
};

/* LoRA (docs/lora.md): on when rank > 0 (or init_from names an adapter). */
struct config_lora {
    int rank;
    double alpha;   /* scale alpha/rank; null: 2·rank */
    double dropout; /* on the adapters' input in training, [0, 1) */
    char **targets; /* module names or suffixes (PEFT's target_modules); default: llama q_proj, v_proj; gpt2 c_attn */
    int n_targets;
    char *init_from;    /* a PEFT adapter folder to start from */
    bool merge_on_save; /* the output folder also holds the merged model */
};

struct config {
    int64_t seed;
    char *output_dir;
    struct config_model model;
    struct config_tokenizer tokenizer;
    struct config_dataset dataset;
    int batch_size;
    int gradient_accumulation_steps;
    int64_t epochs;
    int64_t max_steps; /* 0: none, run the epochs */
    struct config_optimizer optimizer;
    struct config_lr_scheduler lr_scheduler;
    double clip_grad_norm; /* 0: none */
    int64_t log_every_n_steps;
    int64_t eval_every_n_steps; /* 0: never */
    int64_t save_every_n_steps; /* 0: only at the end */
    bool resume;
    bool overwrite;             /* start over a folder that holds an earlier run */
    enum nan_policy nan_policy; /* a step with a non-finite loss or gradient norm */
    int nan_max_skips;          /* skip: non-finite steps in a row before giving up */
    enum save_dtype save_dtype; /* of the final model in output_dir (checkpoints stay fp32) */
    int save_shard_mb;          /* model files above this are written as shards */
    enum precision precision;   /* fp32, bf16 or reproducible (docs/reproducible.md) */
    int device_index;           /* -1: auto */
    struct config_dist dist;
    struct config_lora lora;
    bool profile; /* per-kernel shares of device time, printed after a few steps */
};

/* Loads the recipe at `path`, applies the overrides ("key.sub=value", the
 * value in YAML syntax) in order, resolves defaults and validates. Returns 0,
 * or -1 with the message in err. On error *cfg is left freed. */
int config_load(struct config *cfg, const char *path, int n_overrides, char *const *overrides, char *err,
                size_t errlen);
/* The same from YAML text; `name` stands for the file in messages. */
int config_load_string(struct config *cfg, const char *text, const char *name, int n_overrides, char *const *overrides,
                       char *err, size_t errlen);
void config_free(struct config *cfg);

/* The resolved recipe as YAML that config_load reads back unchanged. */
void config_print(const struct config *cfg, FILE *f);
/* FNV-1a 64 of the resolved recipe, leaving out the keys that may change
 * when a run is resumed (see config_keys.c: output_dir, resume, epochs,
 * batch_size and gradient_accumulation_steps (the global batch is checked
 * separately),
 * max_steps, the logging/eval/save intervals, profile, device.index,
 * dist.*). */
uint64_t config_hash(const struct config *cfg);
/* The hashed keys whose values differ between cfg and `saved`, a recipe
 * config_print wrote, as "key: saved -> cfg's" joined by "; " in out;
 * returns how many differ. */
int config_diff(const struct config *cfg, const char *saved, char *out, size_t n);

#endif
