/* chat_template: a conversation ({role, content} messages) as the text a
 * model's chat template makes of it, and where the assistant's outputs lie
 * in that text. Seven families, written out in C (no Jinja), each equal to
 * what `transformers`' apply_chat_template renders with the published
 * templates for system, user and assistant messages:
 *
 *   llama3  <|begin_of_text|><|start_header_id|>ROLE<|end_header_id|>\n\n
 *           CONTENT(trimmed)<|eot_id|>...; the Llama 3.1 / 3.2 form (its
 *           template mentions "Cutting Knowledge Date") always opens with a
 *           system turn holding that date and the template's fixed
 *           "Today Date" before the system message
 *   chatml  <|im_start|>ROLE\nCONTENT<|im_end|>\n... (Qwen2, Qwen2.5,
 *           SmolLM2), with the system turn the template adds when the first
 *           message is not one (read from the template's text)
 *   llama2  <s>[INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ANSWER </s>
 *           (Llama 2 chat); roles must alternate user / assistant
 *   gemma   <bos><start_of_turn>user\nCONTENT(trimmed)<end_of_turn>\n, 'model'
 *           for the assistant; roles alternate; Gemma 3 writes a system
 *           message + '\n\n' at the start of the first user turn, Gemma 1
 *           and 2 have none
 *   qwen3   ChatML with Qwen3's thinking block: reasoning (before
 *           '</think>') dropped from turns before the last user query, the
 *           answers after it written '<think>\nREASONING\n</think>\n\n' +
 *           answer when last or with reasoning
 *   phi3    <|user|>\nCONTENT<|end|>\n... then EOS (Phi-3, 3.5; Phi-4-mini
 *           without the '\n' after the role tag)
 *   plain   ROLE: CONTENT\n per message; the caller adds BOS and EOS ids
 *
 * The family is tokenizer.chat_template, or with `auto` the one recognized
 * in the chat_template of the tokenizer_config.json (or chat_template.jinja)
 * beside the tokenizer, by distinctive substrings; no template means plain,
 * an unrecognized one is an error. Owns no tokens beyond checking that the
 * template's special strings are single tokens; never reads datasets. */
#ifndef VKTRAIN_CHAT_TEMPLATE_H
#define VKTRAIN_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "vktrain/config.h"
#include "vktrain/tokenizer.h"

struct chat_format {
    enum chat_template kind; /* never CHAT_AUTO once opened */
    bool from_file;          /* detected in the tokenizer's files */
    char *default_system;    /* chatml: the system turn added when none is given; NULL: none */
    char *knowledge, *date;  /* llama3: the 3.1+ system preamble's dates; NULL: the Llama 3 form */
    char *bos, *eos;         /* the text of the tokenizer's BOS and EOS tokens */
    vkt_token end_of_turn;   /* the token that ends an assistant turn */
    bool system_prefix;      /* gemma: a system message opens the first user turn (Gemma 3); else refused */
    bool role_newline;       /* phi3: '\n' after each role tag (Phi-3, 3.5; not Phi-4-mini) */
    bool skip_empty_system;  /* phi3: an empty system message is left out (Phi-3.5) */
};

struct chat_message {
    const char *role; /* "system", "user" or "assistant" */
    const char *content;
    size_t len; /* of content, in bytes */
};

/* The rendered text and the byte ranges [start, end) of what the assistant
 * says (its content and the end-of-turn that follows, as the template
 * writes them). */
struct chat_text {
    char *text;
    size_t len, cap;
    size_t *start, *end;
    size_t n_spans, cap_spans;
};

/* Resolves cfg->chat_template for tokenizer t opened from cfg: 0, or -1 with
 * a message naming the file or the key (an unknown template suggests
 * tokenizer.chat_template; a template whose special strings are not single
 * tokens of t is refused). */
int chat_format_open(struct chat_format *f, const struct config_tokenizer *cfg, const struct tokenizer *t, char *err,
                     size_t errlen);
void chat_format_close(struct chat_format *f);
/* "llama3", "chatml", "llama2", "plain", "gemma", "qwen3" or "phi3". */
const char *chat_format_name(const struct chat_format *f);
/* The template of that name ("auto" included) into *kind: 0, or -1. */
int chat_template_parse(const char *name, enum chat_template *kind);
/* Renders n messages into out (reset first), with the assistant's header
 * at the end when generation_prompt. NULL, or what is wrong with the
 * conversation for this template (e.g. llama2's role order). */
const char *chat_render(const struct chat_format *f, const struct chat_message *m, size_t n, bool generation_prompt,
                        struct chat_text *out);
void chat_text_free(struct chat_text *t);

#endif
