/* tokenize_driver: runs vktrain's hf tokenizer for tests/test_tokenizer_hf.py.
 *   tokenize_driver info TOKENIZER_JSON
 *       prints "size S bos B eos E pad P"
 *   tokenize_driver encode TOKENIZER_JSON FILE...
 *       prints the ids of each file's bytes, one line per file
 *   tokenize_driver roundtrip TOKENIZER_JSON FILE OUT
 *       writes decode(encode(FILE)) to OUT
 *   tokenize_driver decode TOKENIZER_JSON OUT ID...
 *       writes the text of the ids to OUT
 *   tokenize_driver classes - < CODE_POINTS
 *       prints the pre-tokenizer class (L, N, S, O) of each decimal code
 *       point read from stdin, one letter per line
 *   tokenize_driver cases - < CODE_POINTS
 *       prints the o200k letter case of each: U (Lu, Lt), l (Ll), L (Lm,
 *       Lo), M (a mark) or - (none of these)
 *   tokenize_driver nfc IN OUT
 *       writes the NFC of IN's bytes to OUT
 *   tokenize_driver split gpt2|llama3|qwen2|o200k FILE
 *       prints the byte lengths of the pieces the split regex cuts FILE
 *       into, one line
 *   tokenize_driver bench TOKENIZER_JSON FILE
 *       encodes FILE with a fresh tokenizer (cold cache) and again (warm),
 *       prints the MB/s of each
 * Exit status 1 with the message on stderr when the tokenizer fails to
 * open. */
#include "vktrain/tokenizer.h"

#include "../../src/tokenizer/tokenizer_hf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(2);
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + len, 1, cap - len, f)) > 0) {
        len += r;
        if (len == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    *n = len;
    return buf;
}

static void spit(const char *path, const char *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, n, f) != n || fclose(f)) {
        perror(path);
        exit(2);
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void open_tok(struct tokenizer *t, const char *path)
{
    struct config_tokenizer cfg = {.type = TOKENIZER_HF, .path = (char *)path};
    char err[2048];
    if (tokenizer_open(t, &cfg, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
}

/* decode into a buffer of the right size */
static char *decode_all(const struct tokenizer *t, const vkt_token *ids, size_t n, size_t *len)
{
    *len = tokenizer_decode(t, ids, n, NULL, 0);
    char *out = malloc(*len + 1);
    tokenizer_decode(t, ids, n, out, *len + 1);
    return out;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: tokenize_driver info|encode|roundtrip|decode|bench TOKENIZER_JSON ...\n"
                        "       tokenize_driver classes - < CODE_POINTS\n");
        return 2;
    }
    const char *mode = argv[1];
    if (!strcmp(mode, "nfc") && argc == 4) {
        size_t n;
        char *text = slurp(argv[2], &n), *out = malloc(3 * n + 1);
        spit(argv[3], out, tokenizer_hf_nfc(text, n, out));
        free(text), free(out);
        return 0;
    }
    if (!strcmp(mode, "split") && argc == 4) {
        static const char *const names[] = {
            [HF_RE_GPT2] = "gpt2", [HF_RE_LLAMA3] = "llama3", [HF_RE_QWEN2] = "qwen2", [HF_RE_O200K] = "o200k"};
        const int n_names = (int)(sizeof names / sizeof *names);
        int r = 0;
        while (r < n_names && strcmp(names[r], argv[2]))
            r++;
        if (r == n_names) {
            fprintf(stderr, "tokenize_driver: no regex %s\n", argv[2]);
            return 2;
        }
        size_t n;
        char *text = slurp(argv[3], &n);
        for (size_t i = 0; i < n;) {
            size_t e = hf_regex_end((enum hf_regex)r, (const unsigned char *)text, i, n);
            printf(i ? " %zu" : "%zu", e - i);
            i = e;
        }
        printf("\n");
        free(text);
        return 0;
    }
    if (!strcmp(mode, "classes")) {
        unsigned long cp;
        while (scanf("%lu", &cp) == 1)
            printf("%c\n", tokenizer_hf_class((uint32_t)cp));
        return 0;
    }
    if (!strcmp(mode, "cases")) {
        unsigned long cp;
        while (scanf("%lu", &cp) == 1)
            printf("%c\n", "UlLM-"[hf_case((uint32_t)cp)]);
        return 0;
    }
    struct tokenizer t;
    open_tok(&t, argv[2]);
    if (!strcmp(mode, "info")) {
        printf("size %d bos %d eos %d pad %d\n", t.size, t.bos, t.eos, t.pad);
    } else if (!strcmp(mode, "encode")) {
        for (int a = 3; a < argc; a++) {
            size_t n;
            char *text = slurp(argv[a], &n);
            vkt_token *ids = NULL;
            size_t cap = 0, k = tokenizer_encode_all(&t, text, n, &ids, &cap);
            for (size_t i = 0; i < k; i++)
                printf(i ? " %u" : "%u", (unsigned)ids[i]);
            printf("\n");
            free(ids);
            free(text);
        }
    } else if (!strcmp(mode, "roundtrip") && argc == 5) {
        size_t n, len;
        char *text = slurp(argv[3], &n);
        vkt_token *ids = NULL;
        size_t cap = 0, k = tokenizer_encode_all(&t, text, n, &ids, &cap);
        char *back = decode_all(&t, ids, k, &len);
        spit(argv[4], back, len);
        printf("%zu bytes, %zu ids\n", n, k);
        free(back), free(ids), free(text);
    } else if (!strcmp(mode, "decode") && argc >= 4) {
        size_t n = (size_t)(argc - 4), len;
        vkt_token *ids = malloc((n + 1) * sizeof *ids);
        for (size_t i = 0; i < n; i++)
            ids[i] = (vkt_token)strtoul(argv[4 + i], NULL, 10);
        char *back = decode_all(&t, ids, n, &len);
        spit(argv[3], back, len);
        free(back), free(ids);
    } else if (!strcmp(mode, "bench") && argc == 4) {
        size_t n;
        char *text = slurp(argv[3], &n);
        vkt_token *ids = NULL;
        size_t cap = 0;
        for (int pass = 0; pass < 2; pass++) {
            double t0 = now();
            size_t k = tokenizer_encode_all(&t, text, n, &ids, &cap);
            double dt = now() - t0;
            printf("%s: %.1f MB, %zu ids, %.3f s, %.1f MB/s\n", pass ? "warm cache" : "cold cache", (double)n / 1e6, k,
                   dt, (double)n / 1e6 / dt);
        }
        free(ids), free(text);
    } else {
        fprintf(stderr, "tokenize_driver: bad arguments for %s\n", mode);
        return 2;
    }
    tokenizer_close(&t);
    return 0;
}
