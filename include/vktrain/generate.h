/* generate: text generation from a model, one token at a time, with a
 * key/value cache so the cost of a token is linear in its position.
 *
 * A decoder owns the cache (per layer, keys and values of every position
 * so far: (max_seq_len, n_kv_heads, head_dim) each) and the single-token
 * activations; it reads the model's weights and never touches the model's
 * training activations or gradients, so it may run between training steps.
 * Sampling (temperature, top-k, a seeded generator) runs on the host and
 * is the same on every device. Nothing here knows files or tokenizers. */
#ifndef VKTRAIN_GENERATE_H
#define VKTRAIN_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "vktrain/model.h"

struct decoder;

struct decoder *decoder_create(struct model *m);
void decoder_destroy(struct decoder *d);
/* Forgets the cache: the next token is at position 0. */
void decoder_reset(struct decoder *d);
/* The position the next decoder_step will fill (= tokens seen so far). */
uint32_t decoder_position(const struct decoder *d);
/* Runs `token` at the next position through every layer (appending its
 * keys and values to the cache), submits, and returns the vocab_size
 * logits for the token that follows (owned by the decoder, valid until
 * the next step). Fatal if the token is outside the vocabulary or the
 * cache is full (position == max_seq_len). */
const float *decoder_step(struct decoder *d, int32_t token);

/* Draws an id < n from logits: temperature <= 0 is greedy (the first
 * largest logit); else softmax(logits / temperature) restricted to the
 * top_k largest logits (0 = all; ties broken by the lower id). */
int32_t generate_sample(const float *logits, uint32_t n, float temperature, uint32_t top_k, uint64_t *rng);

enum generate_stop {
    GENERATE_STOP_LENGTH,  /* max_new_tokens were generated */
    GENERATE_STOP_EOS,     /* a stop token was drawn (it is not kept) */
    GENERATE_STOP_CONTEXT, /* the cache is full: max_seq_len positions */
};

struct generate_options {
    uint32_t max_new_tokens;
    float temperature; /* <= 0: greedy */
    uint32_t top_k;    /* 0: no limit */
    uint64_t seed;
    uint32_t n_vocab; /* draw only ids < n_vocab (the tokenizer's size); 0: vocab_size */
    /* Stop tokens (an end-of-turn, the tokenizer's eos, ...): drawing one of
     * the n_stop ids ends the generation; n_stop 0: none. */
    const int32_t *stop_ids;
    size_t n_stop;
    /* Called with each new token as it is drawn (may be NULL). */
    void (*on_token)(int32_t token, void *ctx);
    void *ctx;
};

/* Resets the decoder, feeds the n_prompt tokens (n_prompt >= 1, at most
 * max_seq_len), then draws up to max_new_tokens tokens into out (room for
 * max_new_tokens), feeding each back. Returns the number drawn; *stop says
 * why it ended. */
size_t generate_tokens(struct decoder *d, const int32_t *prompt, size_t n_prompt, const struct generate_options *o,
                       int32_t *out, enum generate_stop *stop);

#endif
