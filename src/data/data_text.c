/* data_text: the `text` dataset reader. Each file, or each piece of a file
 * between lines holding only dataset.separator, is a document, stored as
 * BOS + the ids of its text + EOS. A piece does not include the line break
 * that ends its last line (the one before the separator line); empty pieces
 * are skipped.
 * Owns nothing but the read buffer; never builds sequences. */
#include "data_internal.h"

#include <stdlib.h>
#include <string.h>

struct text_ctx {
    struct data *d;
    struct data_docs *docs;
};

static void push_doc(void *ctx, const char *text, size_t n)
{
    struct data *d = ((struct text_ctx *)ctx)->d;
    struct data_docs *docs = ((struct text_ctx *)ctx)->docs;
    int64_t start = d->n_tok;
    data_store_push(d, d->tok.bos);
    data_store_encode(d, text, n);
    data_store_push(d, d->tok.eos);
    data_docs_push(docs, start, d->n_tok - start);
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

void data_text_documents(const char *buf, size_t n, const char *sep, data_doc_fn fn, void *ctx)
{
    if (!sep) {
        if (n)
            fn(ctx, buf, n);
        return;
    }
    size_t seplen = strlen(sep), doc = 0, line = 0;
    while (line < n) {
        const char *nl = memchr(buf + line, '\n', n - line);
        size_t end = nl ? (size_t)(nl - buf) : n;
        size_t len = end - line;
        if (len && buf[end - 1] == '\r')
            len--;
        if (len == seplen && !memcmp(buf + line, sep, seplen)) {
            size_t m = chomp(buf + doc, line - doc);
            if (m)
                fn(ctx, buf + doc, m);
            doc = end + 1;
        }
        line = end + 1;
    }
    size_t m = doc < n ? chomp(buf + doc, n - doc) : 0;
    if (m)
        fn(ctx, buf + doc, m);
}

static int text_file(struct data *d, struct data_docs *docs, void *unused, const char *file, const char *buf,
                     size_t n, char *err, size_t errlen)
{
    (void)unused, (void)file, (void)err, (void)errlen;
    struct text_ctx ctx = {d, docs};
    data_text_documents(buf, n, d->cfg->dataset.separator, push_doc, &ctx);
    return 0;
}

int data_read_text(struct data *d, const char *path, struct data_docs *docs, char *err, size_t errlen)
{
    return data_each_file(d, path, docs, text_file, NULL, err, errlen);
}
