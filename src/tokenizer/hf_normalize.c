/* hf_normalize: the normalizers, applied in order to each text between
 * added tokens matched on the raw text: NFC (Qwen2), Prepend (Llama 2:
 * "▁" before a text that is not empty) and Replace of a string (Llama 2:
 * " " -> "▁"). Owns h->norm_buf; never splits text. */
#include "tokenizer_hf.h"

#include "vktrain/util.h"

#include <string.h>

static char *reserve(struct tokenizer_hf *h, int b, size_t n)
{
    if (h->norm_cap[b] < n) {
        h->norm_cap[b] = 2 * n;
        h->norm_buf[b] = vkt_realloc(h->norm_buf[b], h->norm_cap[b], "tokenizer text");
    }
    return h->norm_buf[b];
}

/* Replaces each non-overlapping `from`, left to right, with `to`. */
static size_t replace(const struct hf_norm *r, const char *s, size_t n, char *o)
{
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        if (i + r->from_len <= n && !memcmp(s + i, r->from, r->from_len)) {
            memcpy(o + w, r->to, r->to_len);
            w += r->to_len;
            i += r->from_len;
        } else {
            o[w++] = s[i++];
        }
    }
    return w;
}

const char *hf_normalize(struct tokenizer_hf *h, const char *s, size_t n, size_t *len)
{
    int b = 0; /* the buffer the next step writes */
    for (int k = 0; k < h->n_norm; k++) {
        const struct hf_norm *r = &h->norm[k];
        const char *next = s;
        size_t m = n;
        switch (r->kind) {
        case HF_NORM_NFC:
            m = hf_nfc(s, n, &h->norm_buf[b], &h->norm_cap[b], &next);
            break;
        case HF_NORM_PREPEND:
            if (n) {
                char *o = reserve(h, b, n + r->to_len);
                memcpy(o, r->to, r->to_len);
                memcpy(o + r->to_len, s, n);
                next = o;
                m = n + r->to_len;
            }
            break;
        case HF_NORM_REPLACE: {
            size_t hits = 0;
            for (size_t i = 0; i + r->from_len <= n; i++)
                if (!memcmp(s + i, r->from, r->from_len)) {
                    hits++;
                    i += r->from_len - 1;
                }
            if (hits) {
                char *o = reserve(h, b, n + hits * r->to_len);
                m = replace(r, s, n, o);
                next = o;
            }
            break;
        }
        }
        if (next != s)
            b ^= 1;
        s = next;
        n = m;
    }
    *len = n;
    return s;
}
