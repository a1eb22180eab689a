/* cli_generate: `vktrain generate --model DIR (--prompt TEXT | --chat TEXT
 * [--system TEXT] [--chat-template NAME]) [--max-new-tokens N]
 * [--temperature T] [--top-k K] [--seed S]`.
 *
 * Loads an HF-style model directory (config.json + model.safetensors),
 * encodes <|bos|> + the prompt with DIR/tokenizer.json when the model has
 * one (tokenizer.type: hf), else the byte tokenizer, and prints the
 * prompt followed by the generated text on stdout as it is drawn (the
 * decoder's key/value cache makes each token cost linear in its position).
 * With --chat the message (after an optional system message) is written
 * with the model's chat template (DIR/tokenizer_config.json's, or
 * --chat-template) and the assistant's header, and only the reply is
 * printed. Generation stops at --max-new-tokens, at a stop token (the
 * tokenizer's eos, DIR/generation_config.json's eos_token_id ids, and with
 * --chat the template's end-of-turn token: Llama 3 Instruct models may end
 * a reply with <|end_of_text|> as well as <|eot_id|>), or when the model's
 * max_seq_len is full (a note on stderr says so). Usage errors exit 2, model errors 1;
 * both name the flag or the path. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vktrain/chat_template.h"
#include "vktrain/cli.h"
#include "vktrain/generate.h"
#include "vktrain/gpu.h"
#include "vktrain/model.h"
#include "vktrain/tokenizer.h"
#include "vktrain/util.h"

struct generate_args {
    const char *model, *prompt, *chat, *system;
    enum chat_template chat_template;
    unsigned long long max_new_tokens, top_k, seed;
    double temperature;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: vktrain generate --model DIR (--prompt TEXT | --chat TEXT [--system TEXT]\n"
               "                        [--chat-template NAME]) [--max-new-tokens N] [--temperature T]\n"
               "                        [--top-k K] [--seed S]\n"
               "  --model DIR          an HF-style directory: config.json + model.safetensors\n"
               "  --prompt TEXT        the text to continue (after <|bos|>; DIR/tokenizer.json or bytes)\n"
               "  --chat TEXT          a user message, written with the model's chat template; prints the reply\n"
               "  --system TEXT        a system message before it (with --chat)\n"
               "  --chat-template NAME llama3, chatml, llama2, gemma, qwen3, phi3 or plain\n"
               "                       [DIR/tokenizer_config.json's, else plain]\n"
               "  --max-new-tokens N   tokens to generate at most [256]\n"
               "  --temperature T      softmax temperature; 0 = greedy [0.8]\n"
               "  --top-k K            draw only from the K most likely tokens; 0 = all [0]\n"
               "  --seed S             seed of the sampling generator [1234]\n");
}

static int parse_uint(const char *flag, const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-' || v > max) {
        fprintf(stderr, "vktrain: error: %s: '%s' is not an integer in [0, %llu]\n", flag, s, max);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, struct generate_args *a)
{
    *a = (struct generate_args){.max_new_tokens = 256, .temperature = 0.8, .seed = 1234};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(stdout);
            exit(0);
        }
        int known = !strcmp(f, "--model") || !strcmp(f, "--prompt") || !strcmp(f, "--chat") ||
                    !strcmp(f, "--system") || !strcmp(f, "--chat-template") || !strcmp(f, "--max-new-tokens") ||
                    !strcmp(f, "--temperature") || !strcmp(f, "--top-k") || !strcmp(f, "--seed");
        if (!known) {
            fprintf(stderr, "vktrain: error: generate: unknown %s '%s'\n", f[0] == '-' ? "option" : "argument", f);
            return -1;
        }
        if (i + 1 == argc) {
            fprintf(stderr, "vktrain: error: %s needs a value\n", f);
            return -1;
        }
        const char *v = argv[++i];
        if (!strcmp(f, "--model")) {
            a->model = v;
        } else if (!strcmp(f, "--prompt")) {
            a->prompt = v;
        } else if (!strcmp(f, "--chat")) {
            a->chat = v;
        } else if (!strcmp(f, "--system")) {
            a->system = v;
        } else if (!strcmp(f, "--chat-template")) {
            if (chat_template_parse(v, &a->chat_template) || a->chat_template == CHAT_AUTO) {
                fprintf(stderr,
                        "vktrain: error: --chat-template: '%s' is not llama3, chatml, llama2, gemma, qwen3, phi3 or "
                        "plain\n",
                        v);
                return -1;
            }
        } else if (!strcmp(f, "--max-new-tokens")) {
            if (parse_uint(f, v, 1u << 30, &a->max_new_tokens))
                return -1;
        } else if (!strcmp(f, "--top-k")) {
            if (parse_uint(f, v, 1u << 30, &a->top_k))
                return -1;
        } else if (!strcmp(f, "--seed")) {
            if (parse_uint(f, v, UINT64_MAX, &a->seed))
                return -1;
        } else {
            char *end;
            a->temperature = strtod(v, &end);
            if (!*v || *end || !isfinite(a->temperature) || a->temperature < 0) {
                fprintf(stderr, "vktrain: error: --temperature: '%s' is not a number >= 0\n", v);
                return -1;
            }
        }
    }
    if (!a->model || !a->prompt == !a->chat) {
        fprintf(stderr, "vktrain: error: generate needs %s\n",
                !a->model ? "--model DIR" : a->prompt ? "--prompt or --chat, not both" : "--prompt TEXT or --chat TEXT");
        return -1;
    }
    if (!a->chat && (a->system || a->chat_template != CHAT_AUTO)) {
        fprintf(stderr, "vktrain: error: %s goes with --chat\n", a->system ? "--system" : "--chat-template");
        return -1;
    }
    return 0;
}

/* Prints each drawn token as it comes. */
static void print_token(int32_t token, void *ctx)
{
    const struct tokenizer *t = ctx;
    vkt_token id = (vkt_token)token;
    char text[512];
    size_t n = tokenizer_decode_next(t, &id, 1, text, sizeof text);
    fwrite(text, 1, n < sizeof text ? n : sizeof text - 1, stdout);
    fflush(stdout);
}

/* --chat: the messages written with the chat template, ending with the
 * assistant's header; *bos says whether <|bos|> goes before their ids (the
 * plain form), *stop is the token that ends the reply. 0, or -1 with err. */
static int chat_prompt(const struct generate_args *a, struct config_tokenizer *tc, const struct tokenizer *tok,
                       struct chat_text *out, bool *bos, int32_t *stop, char *err, size_t errlen)
{
    struct chat_format f;
    tc->chat_template = a->chat_template;
    if (chat_format_open(&f, tc, tok, err, errlen))
        return -1;
    struct chat_message m[2];
    size_t n = 0;
    if (a->system)
        m[n++] = (struct chat_message){"system", a->system, strlen(a->system)};
    m[n++] = (struct chat_message){"user", a->chat, strlen(a->chat)};
    const char *bad = chat_render(&f, m, n, true, out);
    if (bad)
        snprintf(err, errlen, "--chat: %s", bad);
    *bos = f.kind == CHAT_PLAIN;
    *stop = (int32_t)f.end_of_turn;
    chat_format_close(&f);
    return bad ? -1 : 0;
}

/* Adds id to the n stop ids in stop (room for max) unless it is there or
 * is not below vocab. */
static void add_stop(int32_t *stop, size_t *n, size_t max, json_int_t id, uint32_t vocab)
{
    if (id < 0 || id >= (json_int_t)vocab || *n == max)
        return;
    for (size_t i = 0; i < *n; i++)
        if (stop[i] == (int32_t)id)
            return;
    stop[(*n)++] = (int32_t)id;
}

/* DIR/generation_config.json's eos_token_id, an id or a list of ids, as
 * transformers' generate stops at; a missing or unreadable file adds none. */
static void generation_config_stops(const char *dir, int32_t *stop, size_t *n, size_t max, uint32_t vocab)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    json_t *root = json_load_file(path, 0, NULL);
    json_t *e = root ? json_object_get(root, "eos_token_id") : NULL;
    if (json_is_integer(e))
        add_stop(stop, n, max, json_integer_value(e), vocab);
    for (size_t i = 0; json_is_array(e) && i < json_array_size(e); i++)
        if (json_is_integer(json_array_get(e, i)))
            add_stop(stop, n, max, json_integer_value(json_array_get(e, i)), vocab);
    json_decref(root);
}

static int run(const struct generate_args *a)
{
    char err[4096];
    struct stat st;
    if (stat(a->model, &st) || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "vktrain: error: --model: '%s' is not a directory\n", a->model);
        return 1;
    }
    struct model_config c;
    if (model_config_read(a->model, &c, err, sizeof err)) {
        fprintf(stderr, "vktrain: error: %s\n", err);
        return 1;
    }
    /* DIR/tokenizer.json (a model trained with tokenizer.type: hf) or the
     * byte tokenizer; a vocab_size beyond the tokenizer's ids is padding
     * that is never drawn. */
    char tok_path[4096];
    snprintf(tok_path, sizeof tok_path, "%s/tokenizer.json", a->model);
    struct config_tokenizer tc = {.type = access(tok_path, R_OK) ? TOKENIZER_BYTE : TOKENIZER_HF,
                                  .path = tok_path};
    struct tokenizer tok;
    if (tokenizer_open(&tok, &tc, err, sizeof err)) {
        fprintf(stderr, "vktrain: error: %s\n", err);
        return 1;
    }
    if (c.vocab_size < (tc.type == TOKENIZER_HF ? (uint32_t)tok.size : 256u)) {
        fprintf(stderr, "vktrain: error: %s/config.json: vocab_size %u is smaller than the tokenizer's %d ids\n",
                a->model, c.vocab_size, tc.type == TOKENIZER_HF ? tok.size : 256);
        tokenizer_close(&tok);
        return 1;
    }
    struct chat_text chat = {0};
    bool bos = true;
    int32_t end_of_turn = -1;
    if (a->chat && chat_prompt(a, &tc, &tok, &chat, &bos, &end_of_turn, err, sizeof err)) {
        fprintf(stderr, "vktrain: error: %s\n", err);
        chat_text_free(&chat);
        tokenizer_close(&tok);
        return 1;
    }
    const char *flag = a->chat ? "--chat" : "--prompt";
    size_t n_text = a->chat ? chat.len : strlen(a->prompt), n_prompt = 0;
    int with_bos = bos && c.vocab_size > (uint32_t)tok.bos;
    vkt_token *ids = NULL;
    size_t ids_cap = 0;
    size_t n_ids = tokenizer_encode_all(&tok, a->chat ? chat.text : a->prompt, n_text, &ids, &ids_cap);
    chat_text_free(&chat);
    int32_t *prompt = vkt_malloc(sizeof *prompt * (n_ids + 1), "prompt");
    if (with_bos)
        prompt[n_prompt++] = tok.bos;
    for (size_t i = 0; i < n_ids; i++)
        prompt[n_prompt++] = (int32_t)ids[i];
    free(ids);
    if (n_prompt > c.max_seq_len || n_prompt == 0) {
        if (n_prompt)
            fprintf(stderr, "vktrain: error: %s: %zu tokens do not fit the model's max_seq_len %u\n", flag,
                    n_prompt, c.max_seq_len);
        else
            fprintf(stderr, "vktrain: error: --prompt is empty and the model has no <|bos|> token\n");
        free(prompt);
        tokenizer_close(&tok);
        return 1;
    }

    struct gpu_options go = {.device_index = -1, .quiet = 1};
    struct gpu *g = gpu_create(&go);
    struct model *m = model_create(g, &c, 0); /* weights only: the decoder has its own buffers */
    int rc = 1;
    if (model_load(m, a->model, err, sizeof err)) {
        fprintf(stderr, "vktrain: error: %s\n", err);
    } else {
        int32_t stops[16];
        size_t n_stops = 0;
        if (a->chat)
            add_stop(stops, &n_stops, 16, end_of_turn, c.vocab_size);
        add_stop(stops, &n_stops, 16, tok.eos, c.vocab_size);
        generation_config_stops(a->model, stops, &n_stops, 16, c.vocab_size);
        struct generate_options o = {
            .max_new_tokens = (uint32_t)a->max_new_tokens,
            .temperature = (float)a->temperature,
            .top_k = (uint32_t)a->top_k,
            .seed = a->seed,
            .n_vocab = c.vocab_size < (uint32_t)tok.size ? c.vocab_size : (uint32_t)tok.size,
            .stop_ids = stops,
            .n_stop = n_stops,
            .on_token = print_token,
            .ctx = &tok,
        };
        /* At most max_seq_len + 1 − n_prompt tokens can be drawn. */
        size_t room = c.max_seq_len + 1 - n_prompt;
        int32_t *out =
            vkt_malloc(sizeof *out * ((o.max_new_tokens < room ? o.max_new_tokens : room) + 1), "generated tokens");
        struct decoder *d = decoder_create(m);
        if (!a->chat)
            fputs(a->prompt, stdout);
        fflush(stdout);
        enum generate_stop stop;
        generate_tokens(d, prompt, n_prompt, &o, out, &stop);
        fputc('\n', stdout);
        fflush(stdout); /* before the note on stderr */
        if (stop == GENERATE_STOP_CONTEXT)
            fprintf(stderr, "vktrain: note: stopped at the model's max_seq_len (%u tokens)\n", c.max_seq_len);
        decoder_destroy(d);
        free(out);
        rc = 0;
    }
    free(prompt);
    tokenizer_close(&tok);
    model_destroy(m);
    gpu_destroy(g);
    return rc;
}

int cli_generate(int argc, char **argv)
{
    struct generate_args a;
    if (parse_args(argc, argv, &a)) {
        fprintf(stderr, "run `vktrain generate --help` for the options\n");
        return 2;
    }
    return run(&a);
}
