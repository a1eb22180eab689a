/* cli_tokenize: `vktrain tokenize --tokenizer PATH --input FILE...
 * --output SHARD [--separator LINE]`.
 *
 * Encodes text files into one llm.c token shard that `dataset.type:
 * tokens` reads: the documents of each file as the `text` dataset makes
 * them (the whole file, or the pieces between lines holding only the
 * separator), each written as BOS + ids + EOS, so the shard holds the token
 * stream the text dataset would build. uint16 tokens (magic 20240520) when
 * every id of the tokenizer fits in 16 bits, else uint32 (20240801). The
 * shard appears only when complete. Prints one summary line. Usage errors
 * exit 2, others 1, naming the flag or the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vktrain/cli.h"
#include "vktrain/data.h"
#include "vktrain/tokenizer.h"
#include "vktrain/util.h"

struct tokenize_args {
    const char *tokenizer, *output, *separator;
    const char **inputs;
    int n_inputs;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: vktrain tokenize --tokenizer PATH --input FILE... --output SHARD [--separator LINE]\n"
               "  --tokenizer PATH   a Hugging Face tokenizer.json, or a model folder holding one\n"
               "  --input FILE...    text files, each a document (or split by --separator)\n"
               "  --output SHARD     the llm.c token shard to write (uint16 ids when they fit, else uint32)\n"
               "  --separator LINE   a line holding only LINE separates documents within a file\n"
               "Each document is written as BOS + its ids + EOS, as the text dataset stores it.\n");
}

static int parse_args(int argc, char **argv, struct tokenize_args *a)
{
    *a = (struct tokenize_args){0};
    a->inputs = vkt_calloc((size_t)argc, sizeof *a->inputs, "arguments");
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            usage(stdout);
            exit(0);
        }
        const char **slot = !strcmp(f, "--tokenizer") ? &a->tokenizer
                            : !strcmp(f, "--output")  ? &a->output
                            : !strcmp(f, "--separator") ? &a->separator
                                                        : NULL;
        if (!slot && strcmp(f, "--input")) {
            fprintf(stderr, "vktrain: error: tokenize: unknown %s '%s'\n", f[0] == '-' ? "option" : "argument", f);
            return -1;
        }
        if (i + 1 == argc || (!strncmp(argv[i + 1], "--", 2) && strcmp(f, "--separator"))) {
            fprintf(stderr, "vktrain: error: %s needs a value\n", f);
            return -1;
        }
        if (slot) {
            *slot = argv[++i];
            continue;
        }
        while (i + 1 < argc && strncmp(argv[i + 1], "--", 2))
            a->inputs[a->n_inputs++] = argv[++i];
    }
    const char *missing = !a->tokenizer ? "--tokenizer PATH" : !a->n_inputs ? "--input FILE..." : !a->output
                                                                                                   ? "--output SHARD"
                                                                                                   : NULL;
    if (missing) {
        fprintf(stderr, "vktrain: error: tokenize needs %s\n", missing);
        return -1;
    }
    return 0;
}

struct run {
    struct tokenizer tok;
    struct shard_writer shard;
    vkt_token *ids;
    size_t cap;
    int64_t docs;
    int failed;
    char err[4096];
};

static void write_doc(void *ctx, const char *text, size_t n)
{
    struct run *r = ctx;
    if (r->failed)
        return;
    vkt_token bos = (vkt_token)r->tok.bos, eos = (vkt_token)r->tok.eos;
    size_t k = tokenizer_encode_all(&r->tok, text, n, &r->ids, &r->cap);
    r->failed = shard_write(&r->shard, &bos, 1, r->err, sizeof r->err) ||
                shard_write(&r->shard, r->ids, k, r->err, sizeof r->err) ||
                shard_write(&r->shard, &eos, 1, r->err, sizeof r->err);
    r->docs++;
}

static int run(const struct tokenize_args *a)
{
    struct run r = {0};
    struct config_tokenizer tc = {.type = TOKENIZER_HF, .path = (char *)a->tokenizer};
    if (tokenizer_open(&r.tok, &tc, r.err, sizeof r.err)) {
        fprintf(stderr, "vktrain: error: --tokenizer: %s\n", r.err);
        return 1;
    }
    int width = r.tok.size <= 65536 ? 2 : 4;
    if (shard_open(&r.shard, a->output, width, r.err, sizeof r.err)) {
        fprintf(stderr, "vktrain: error: --output: %s\n", r.err);
        tokenizer_close(&r.tok);
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char *buf = NULL;
    size_t buf_cap = 0, n;
    int64_t bytes = 0;
    for (int i = 0; i < a->n_inputs && !r.failed; i++) {
        if (data_read_file(a->inputs[i], &buf, &buf_cap, &n, r.err, sizeof r.err)) {
            r.failed = 1;
            break;
        }
        data_text_documents(buf, n, a->separator, write_doc, &r);
        bytes += (int64_t)n;
    }
    int64_t count = r.shard.count;
    if (!r.failed)
        r.failed = shard_finish(&r.shard, r.err, sizeof r.err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (r.failed) {
        fprintf(stderr, "vktrain: error: %s\n", r.err);
        shard_abort(&r.shard);
    } else {
        printf("tokenize: %d files, %lld documents, %lld bytes -> %lld tokens (uint%d) in %s, %.3f s, %.1f MB/s\n",
               a->n_inputs, (long long)r.docs, (long long)bytes, (long long)count, 8 * width, a->output, sec,
               sec > 0 ? (double)bytes / 1e6 / sec : 0.0);
    }
    free(buf);
    free(r.ids);
    tokenizer_close(&r.tok);
    return r.failed ? 1 : 0;
}

int cli_tokenize(int argc, char **argv)
{
    struct tokenize_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) {
        fprintf(stderr, "run `vktrain tokenize --help` for the options\n");
        free(a.inputs);
        return 2;
    }
    rc = run(&a);
    free(a.inputs);
    return rc;
}
