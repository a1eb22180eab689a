/*
 * ref_model.h — a whole-model reference in double precision, forward and
 * backward, for the two architectures of docs/training.md ("Models"):
 *
 *   llama: embed_tokens → n_layers × [x += o_proj(attn(rope(q,k), v)) of
 *          RMSNorm(x); x += down(silu(gate(·)) ⊙ up(·)) of RMSNorm(x)]
 *          → RMSNorm → lm_head (or embed_tokens when tied). No biases.
 *   gpt2:  wte + wpe → n_layers × [x += c_proj(attn(split(c_attn(·)))) of
 *          LayerNorm(x); x += c_proj(gelu(c_fc(·))) of LayerNorm(x)]
 *          → ln_f → wteᵀ (always tied). Conv1D weights stored [in, out].
 *
 * Parameters live in one table of (Hugging Face name, shape, data, grad)
 * built by one function, so tests can copy weights in and compare gradients
 * by name. The model owns its memory; ops come from ref_ops.h.
 *
 * The loss follows the normalization contract: the forward returns the SUM
 * of the per-token losses and the count of valid tokens, and the gradient of
 * the backward is that of scale·Σ ℓ_i (the step passes scale = 1/N).
 */
#ifndef VKTRAIN_REF_MODEL_H
#define VKTRAIN_REF_MODEL_H

#include <stddef.h>
#include <stdint.h>

enum ref_arch { REF_ARCH_LLAMA = 0, REF_ARCH_GPT2 = 1 };

struct ref_model_config {
    enum ref_arch arch;
    int vocab;       // V
    int dim;         // C; head_dim = dim / n_heads
    int n_layers;    // L
    int n_heads;     // H
    int n_kv_heads;  // KVH, divides H (gpt2: must equal H)
    int hidden_dim;  // F, the MLP width
    int max_seq_len; // positions must be < max_seq_len (gpt2: rows of wpe)
    double norm_eps;
    double rope_theta; // llama only
    int tied;          // lm head = embedding (gpt2: must be 1)
    int sliding_window; // > 0: query t sees keys t' with t − t' < sliding_window
    unsigned full_layers; // bit l: layer l attends to the whole causal row despite sliding_window
    unsigned nope_layers; // bit l: layer l has no RoPE (llama)
};

/* How a parameter is initialized in training (docs/recipes.md,
 * model.init_std): matrices normal(0, init_std), norm weights 1, biases 0. */
enum ref_param_init { REF_INIT_NORMAL, REF_INIT_ONES, REF_INIT_ZEROS };

struct ref_param {
    char hf_name[64];
    int ndim;     // 1 or 2
    int shape[2]; // as Hugging Face stores it
    size_t numel;
    enum ref_param_init init;
    double *data; // into the model's parameter block
    double *grad; // into the model's gradient block
};

/* Pointers to one layer's tensors (weights or their gradients); a tensor the
 * architecture does not have is NULL. */
struct ref_layer_weights {
    double *norm1_w, *norm1_b;      // input_layernorm / ln_1, (C)
    double *wq, *wk, *wv;           // llama q,k,v_proj: (H*hd,C), (KVH*hd,C), (KVH*hd,C)
    double *wqkv, *bqkv;            // gpt2 attn.c_attn: (C,3C), (3C)
    double *wo, *bo;                // llama o_proj (C,H*hd) / gpt2 attn.c_proj (C,C), (C)
    double *norm2_w, *norm2_b;      // post_attention_layernorm / ln_2, (C)
    double *w_gate, *w_up, *w_down; // llama mlp: (F,C), (F,C), (C,F)
    double *w_fc, *b_fc;            // gpt2 mlp.c_fc: (C,F), (F)
    double *w_proj, *b_proj;        // gpt2 mlp.c_proj: (F,C), (C)
};

struct ref_weights {
    double *wte;                      // embed_tokens / wte, (V,C)
    double *wpe;                      // gpt2 wpe, (max_seq_len,C)
    struct ref_layer_weights *layers; // (L)
    double *normf_w, *normf_b;        // model.norm / ln_f, (C)
    double *lm_head;                  // (V,C); the same pointer as wte when tied
};

/* Activations of one layer for N = B*T tokens (the forward's saved values;
 * the backward uses a second set of the same shapes for their gradients). */
struct ref_layer_acts {
    double *norm1, *mean1, *rstd1; // (N,C), (N), (N)
    double *qkv;                   // gpt2 c_attn output, (N,3C)
    double *q_pre, *k_pre;         // llama q, k before RoPE, (N,H*hd), (N,KVH*hd)
    double *q, *k, *v;             // attention inputs, (N,H*hd), (N,KVH*hd), (N,KVH*hd)
    double *probs;                 // (B,H,T,T)
    double *att;                   // attention output, (N,H*hd)
    double *attproj;               // o_proj / c_proj output, (N,C)
    double *res1;                  // residual stream after attention, (N,C)
    double *norm2, *mean2, *rstd2; // (N,C), (N), (N)
    double *fc;                    // llama gate / gpt2 c_fc output, (N,F)
    double *up;                    // llama up, (N,F)
    double *hid;                   // swiglu / gelu output, (N,F)
    double *mlp;                   // down / c_proj output, (N,C)
    double *res2;                  // residual stream after the MLP, (N,C)
};

struct ref_acts {
    double *encoded;               // embeddings (+ positions), (N,C)
    struct ref_layer_acts *layers; // (L)
    double *normf, *meanf, *rstdf; // (N,C), (N), (N)
    double *logits;                // (N,V)
};

struct ref_model {
    struct ref_model_config cfg;
    int head_dim;
    struct ref_param *params; // the table, in Hugging Face order
    int n_params;
    size_t num_parameters; // total elements
    double *params_memory, *grads_memory;
    struct ref_weights w; // pointers into params_memory
    struct ref_weights g; // pointers into grads_memory (same layout)

    // the last forward: its batch (copied), activations and dlogits
    int B, T;
    int32_t *tokens, *positions, *doc_ids; // (B*T)
    int has_doc_ids;                       // 0: the forward had doc_ids == NULL
    struct ref_acts acts;                  // forward activations
    struct ref_acts dacts;                 // their gradients, filled by the backward (dacts.logits unused: see dlogits)
    double *acts_memory, *dacts_memory;
    size_t acts_size; // elements in each of the two blocks
    double *dlogits;  // (N,V), written by the fused cross-entropy
    int have_dlogits; // the last forward had labels
    int n_bad_labels; // labels of the last forward outside [0,V) and ≠ −100
};

/* Builds the parameter table for cfg and allocates parameters and gradients
 * (all zero). Returns 0, or −1 (with a message on stderr) on a bad config. */
int ref_model_init(struct ref_model *m, const struct ref_model_config *cfg);
void ref_model_free(struct ref_model *m);

/* The table entry with this Hugging Face name, or NULL. */
struct ref_param *ref_model_param(struct ref_model *m, const char *hf_name);

/* Fills every parameter from a seeded generator, in table order, so that no
 * tensor is trivial: REF_INIT_NORMAL → std·N(0,1), REF_INIT_ONES →
 * 1 + std·N(0,1), REF_INIT_ZEROS → std·N(0,1). For tests. */
void ref_model_randomize(struct ref_model *m, uint64_t seed, double std);

void ref_model_zero_grad(struct ref_model *m);

/* Forward for B sequences of T tokens. tokens (B*T) in [0,V); labels (B*T)
 * or NULL (logits only); positions (B*T) in [0,max_seq_len), or NULL for
 * 0..T−1 in every sequence; doc_ids (B*T) or NULL (one document per
 * sequence). With labels, *loss_sum = Σ ℓ_i over the valid tokens, *count
 * their number, and dlogits = (softmax − onehot)·scale are kept for the
 * backward; out-of-range labels are ignored and counted in m->n_bad_labels.
 * Logits are in m->acts.logits, (B*T,V). Returns 0, or −1 on a bad input. */
int ref_model_forward(struct ref_model *m, int B, int T, const int32_t *tokens, const int32_t *labels,
                      const int32_t *positions, const int32_t *doc_ids, double scale, double *loss_sum, int *count);

/* Backward of the last forward (which must have had labels): ACCUMULATES
 * ∂(scale·Σ ℓ_i)/∂θ into every gradient of the table. Returns 0, or −1 when
 * there is no forward with labels to differentiate. */
int ref_model_backward(struct ref_model *m);

#endif
