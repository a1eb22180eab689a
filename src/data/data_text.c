/* data_text: the `text` dataset reader. Each file, or each piece of a file
 * between lines holding only dataset.separator, is a document, stored as
 * BOS + the ids of its text + EOS. A piece does not include the line break
 * that ends its last line (the one before the separator line); empty pieces
 * are skipped.
 * Owns nothing but the read buffer; never builds sequences. */
#include "data_internal.h"

#include <stdlib.h>
#include <string.h>

static void push_doc(struct data *d, struct data_docs *docs, const char *text, size_t n)
{
    if (n == 0)
        return;
    data_store_reserve(d, (int64_t)n + 2);
    vkt_token *out = d->tok_ids + d->n_tok;
    out[0] = (vkt_token)d->tok.bos;
    size_t k = tokenizer_encode(&d->tok, text, n, out + 1); /* k <= n ids */
    out[k + 1] = (vkt_token)d->tok.eos;
    data_docs_push(docs, d->n_tok, (int64_t)k + 2);
    d->n_tok += (int64_t)k + 2;
    d->stats.n_docs++;
}

/* Length of text[0..n) without one trailing "\n" or "\r\n". */
static size_t chomp(const char *text, size_t n)
{
    if (n && text[n - 1] == '\n')
        n--;
    if (n && text[n - 1] == '\r')
        n--;
    return n;
}

static void split_file(struct data *d, struct data_docs *docs, const char *buf, size_t n, const char *sep)
{
    size_t seplen = strlen(sep), doc = 0, line = 0;
    while (line < n) {
        const char *nl = memchr(buf + line, '\n', n - line);
        size_t end = nl ? (size_t)(nl - buf) : n;
        size_t len = end - line;
        if (len && buf[end - 1] == '\r')
            len--;
        if (len == seplen && !memcmp(buf + line, sep, seplen)) {
            push_doc(d, docs, buf + doc, chomp(buf + doc, line - doc));
            doc = end + 1;
        }
        line = end + 1;
    }
    if (doc < n)
        push_doc(d, docs, buf + doc, chomp(buf + doc, n - doc));
}

static int text_file(struct data *d, struct data_docs *docs, const char *file, const char *buf, size_t n, char *err,
                     size_t errlen)
{
    (void)file, (void)err, (void)errlen;
    if (d->cfg->dataset.separator)
        split_file(d, docs, buf, n, d->cfg->dataset.separator);
    else
        push_doc(d, docs, buf, n);
    return 0;
}

int data_read_text(struct data *d, const char *path, struct data_docs *docs, char *err, size_t errlen)
{
    return data_each_file(d, path, docs, text_file, err, errlen);
}
