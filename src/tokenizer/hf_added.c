/* hf_added: added tokens (tokenizer.json's added_tokens) found in the text,
 * as the `tokenizers` library finds them: tokens with normalized false on
 * the raw text, those with normalized true on the normalized text (their
 * content normalized too), each time the leftmost match, the longest of
 * those starting there, then on after its end. A single_word token is
 * skipped where a word character (\w) touches it; lstrip and rstrip take
 * the white space beside the token into it. Owns the two tries; never
 * encodes the text between tokens (hf_gap_fn does). */
#include "tokenizer_hf.h"

#include "vktrain/util.h"

#include <stdlib.h>
#include <string.h>

static uint32_t trie_child(const struct hf_trie *t, uint32_t node, unsigned char b)
{
    const struct pmap_slot *c = hf_pmap_get(&t->child, node, b);
    return c ? c->id : 0;
}

void hf_trie_build(struct hf_trie *t, const struct hf_added_token *tok, size_t n, bool want)
{
    memset(t, 0, sizeof *t);
    size_t bytes = 1;
    for (size_t i = 0; i < n; i++)
        if (tok[i].normalized == want)
            bytes += tok[i].len;
    hf_pmap_init(&t->child, bytes);
    t->term = vkt_calloc(bytes, sizeof *t->term, "added tokens");
    t->n_nodes = 1;
    for (size_t i = 0; i < n; i++) {
        if (tok[i].normalized != want || !tok[i].len)
            continue;
        uint32_t node = 0;
        for (size_t j = 0; j < tok[i].len; j++) {
            unsigned char b = (unsigned char)tok[i].match[j];
            uint32_t c = trie_child(t, node, b);
            if (!c) {
                c = (uint32_t)t->n_nodes++;
                hf_pmap_set(&t->child, node, b, 0, c);
            }
            node = c;
        }
        t->term[node] = (uint32_t)i + 1; /* a later token with the same text wins */
        t->first[(unsigned char)tok[i].match[0]] = true;
    }
}

void hf_trie_free(struct hf_trie *t)
{
    hf_pmap_free(&t->child);
    free(t->term);
    memset(t, 0, sizeof *t);
}

/* The longest token at s[i]: its index + 1 and end, or 0. */
static uint32_t longest_at(const struct hf_trie *t, const unsigned char *s, size_t i, size_t n, size_t *end)
{
    uint32_t node = 0, best = 0;
    for (size_t j = i; j < n; j++) {
        node = trie_child(t, node, s[j]);
        if (!node)
            break;
        if (t->term[node]) {
            best = t->term[node];
            *end = j + 1;
        }
    }
    return best;
}

/* Whether a \w character ends s[0..i) or starts s[i..n). */
static bool word_before(const unsigned char *s, size_t i)
{
    if (!i)
        return false;
    size_t k = i - 1, len;
    while (k > 0 && i - k < 4 && (s[k] & 0xc0) == 0x80)
        k--;
    uint32_t cp = hf_utf8_next(s + k, i - k, &len);
    if (k + len != i) /* not one character: the last byte alone */
        cp = hf_utf8_next(s + i - 1, 1, &len);
    return hf_is_word(cp);
}

static bool word_after(const unsigned char *s, size_t i, size_t n)
{
    size_t len;
    return i < n && hf_is_word(hf_utf8_next(s + i, n - i, &len));
}

/* The start of the white space that ends s[0..i). */
static size_t space_before(const unsigned char *s, size_t i)
{
    while (i > 0) {
        size_t k = i - 1, len;
        while (k > 0 && i - k < 4 && (s[k] & 0xc0) == 0x80)
            k--;
        uint32_t cp = hf_utf8_next(s + k, i - k, &len);
        if (k + len != i || hf_class(cp) != C_SPACE)
            break;
        i = k;
    }
    return i;
}

/* The end of the white space that starts s[i..n). */
static size_t space_after(const unsigned char *s, size_t i, size_t n)
{
    size_t len;
    while (i < n && hf_class(hf_utf8_next(s + i, n - i, &len)) == C_SPACE)
        i += len;
    return i;
}

void hf_added_split(struct tokenizer_hf *h, const struct hf_trie *t, const char *text, size_t n, bool at_start,
                    hf_gap_fn gap, struct hf_out *out)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t done = 0; /* the text before it is encoded */
    if (t->n_nodes > 1) {
        for (size_t i = 0; i < n;) {
            size_t end;
            uint32_t k = t->first[s[i]] ? longest_at(t, s, i, n, &end) : 0;
            if (!k) {
                i++;
                continue;
            }
            const struct hf_added_token *a = &h->added[k - 1];
            size_t start = i, stop = end;
            i = end;
            if (a->single_word && (word_before(s, start) || word_after(s, stop, n)))
                continue;
            if (a->lstrip) {
                start = space_before(s, start);
                start = start > done ? start : done;
            }
            if (a->rstrip)
                stop = space_after(s, stop, n);
            if (done < start)
                gap(h, text + done, start - done, at_start && done == 0, out);
            vkt_token id = a->id;
            hf_out_push(out, &id, 1);
            done = stop;
        }
    }
    if (done < n)
        gap(h, text + done, n - done, at_start && done == 0, out);
}
