/* hf_bpe: the BPE merge loop both models share (hf_byte_level.c,
 * hf_sentencepiece.c give it a piece's first symbols). As the `tokenizers`
 * library does: the adjacent pair of lowest merge rank, leftmost on a tie,
 * is merged until no pair has a merge; a heap holds the candidate pairs and
 * an entry whose pair has changed since it was pushed is dropped. Owns the
 * merge scratch of struct tokenizer_hf; never reads text. */
#include "tokenizer_hf.h"

#include "vktrain/util.h"

#include <stdlib.h>

struct hf_heap_entry {
    uint32_t rank;
    int32_t pos;
    uint32_t left, right; /* the ids of the pair when it was pushed */
};

void hf_bpe_reserve(struct tokenizer_hf *h, size_t m)
{
    if (m <= h->sym_cap)
        return;
    h->sym_cap = 2 * m;
    h->sym = vkt_realloc(h->sym, h->sym_cap * sizeof *h->sym, "bpe scratch");
    h->prev = vkt_realloc(h->prev, h->sym_cap * sizeof *h->prev, "bpe scratch");
    h->next = vkt_realloc(h->next, h->sym_cap * sizeof *h->next, "bpe scratch");
    h->key = vkt_realloc(h->key, 4 * h->sym_cap, "bpe scratch");
    h->key_cap = 4 * h->sym_cap;
}

static bool heap_less(const struct hf_heap_entry *a, const struct hf_heap_entry *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(struct tokenizer_hf *h, size_t *n, struct hf_heap_entry e)
{
    if (*n == h->heap_cap) {
        h->heap_cap = h->heap_cap ? 2 * h->heap_cap : 64;
        h->heap = vkt_realloc(h->heap, h->heap_cap * sizeof *h->heap, "bpe heap");
    }
    size_t i = (*n)++;
    while (i && heap_less(&e, &h->heap[(i - 1) / 2])) {
        h->heap[i] = h->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->heap[i] = e;
}

static struct hf_heap_entry heap_pop(struct tokenizer_hf *h, size_t *n)
{
    struct hf_heap_entry top = h->heap[0], e = h->heap[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && heap_less(&h->heap[c + 1], &h->heap[c]))
            c++;
        if (!heap_less(&h->heap[c], &e))
            break;
        h->heap[i] = h->heap[c];
        i = c;
    }
    if (*n)
        h->heap[i] = e;
    return top;
}

static void push_pair(struct tokenizer_hf *h, size_t *hn, int32_t pos)
{
    if (pos < 0 || h->next[pos] < 0)
        return;
    int32_t r = h->next[pos];
    const struct pmap_slot *p = hf_pmap_get(&h->merges, h->sym[pos], h->sym[r]);
    if (p)
        heap_push(h, hn, (struct hf_heap_entry){p->rank, pos, h->sym[pos], h->sym[r]});
}

size_t hf_bpe_merge(struct tokenizer_hf *h, size_t m)
{
    if (m < 2)
        return m;
    for (size_t i = 0; i < m; i++) {
        h->prev[i] = (int32_t)i - 1;
        h->next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    size_t hn = 0;
    for (size_t i = 0; i + 1 < m; i++)
        push_pair(h, &hn, (int32_t)i);
    while (hn) {
        struct hf_heap_entry e = heap_pop(h, &hn);
        int32_t r = h->next[e.pos];
        /* stale: the left symbol was absorbed (next -2) or is last, or a
         * side changed since the push */
        if (r < 0 || h->sym[e.pos] != e.left || h->sym[r] != e.right)
            continue;
        h->sym[e.pos] = hf_pmap_get(&h->merges, e.left, e.right)->id;
        h->next[e.pos] = h->next[r];
        if (h->next[r] >= 0)
            h->prev[h->next[r]] = e.pos;
        h->next[r] = -2; /* absorbed */
        push_pair(h, &hn, h->prev[e.pos]);
        push_pair(h, &hn, e.pos);
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = h->next[i])
        h->sym[k++] = h->sym[i];
    return k;
}
