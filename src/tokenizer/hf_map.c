/* hf_map: the hash maps of the hf tokenizer (tokenizer_hf.h): byte strings
 * to two uint32 values (the vocab, the piece cache), and id pairs to a
 * rank and an id (the merges, the added-token trie). Open addressing,
 * linear probing, at most half full. Owns nothing but the maps. */
#include "tokenizer_hf.h"

#include "vktrain/util.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xbf58476d1ce4e5b9ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return h | 1;
}

void hf_smap_init(struct smap *m, size_t cap)
{
    memset(m, 0, sizeof *m);
    m->cap = 16;
    while (m->cap < 2 * cap)
        m->cap *= 2;
    m->slot = vkt_calloc(m->cap, sizeof *m->slot, "tokenizer map");
}

void hf_smap_free(struct smap *m)
{
    free(m->slot);
    free(m->pool);
    memset(m, 0, sizeof *m);
}

void hf_smap_clear(struct smap *m)
{
    memset(m->slot, 0, m->cap * sizeof *m->slot);
    m->n = 0;
    m->pool_n = 0;
}

/* The slot holding key, or the empty slot where it would go. */
static struct smap_slot *smap_find(const struct smap *m, const void *key, size_t len, uint64_t h)
{
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct smap_slot *s = &m->slot[i];
        if (!s->hash || (s->hash == h && s->len == len && !memcmp(m->pool + s->off, key, len)))
            return s;
    }
}

const struct smap_slot *hf_smap_get(const struct smap *m, const void *key, size_t len)
{
    const struct smap_slot *s = smap_find(m, key, len, hash_bytes(key, len));
    return s->hash ? s : NULL;
}

struct smap_slot *hf_smap_put(struct smap *m, const void *key, size_t len, uint32_t val, uint32_t val2)
{
    if (2 * (m->n + 1) > m->cap) {
        struct smap_slot *old = m->slot;
        size_t old_cap = m->cap;
        m->cap *= 2;
        m->slot = vkt_calloc(m->cap, sizeof *m->slot, "tokenizer map");
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].hash) {
                size_t j = old[i].hash & (m->cap - 1);
                while (m->slot[j].hash)
                    j = (j + 1) & (m->cap - 1);
                m->slot[j] = old[i];
            }
        free(old);
    }
    uint64_t h = hash_bytes(key, len);
    struct smap_slot *s = smap_find(m, key, len, h);
    if (s->hash)
        return s;
    if (m->pool_n + len > m->pool_cap) {
        m->pool_cap = 2 * (m->pool_n + len) + 256;
        m->pool = vkt_realloc(m->pool, m->pool_cap, "tokenizer strings");
    }
    memcpy(m->pool + m->pool_n, key, len);
    *s = (struct smap_slot){h, (uint32_t)m->pool_n, (uint32_t)len, val, val2};
    m->pool_n += len;
    m->n++;
    return s;
}

void hf_pmap_init(struct pmap *m, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    m->slot = vkt_calloc(cap, sizeof *m->slot, "tokenizer merges");
    m->mask = cap - 1;
}

void hf_pmap_free(struct pmap *m)
{
    free(m->slot);
    memset(m, 0, sizeof *m);
}

static size_t pmap_index(uint64_t key, size_t mask)
{
    key *= 0x9e3779b97f4a7c15ull;
    return (size_t)(key ^ key >> 31) & mask;
}

const struct pmap_slot *hf_pmap_get(const struct pmap *m, uint32_t a, uint32_t b)
{
    uint64_t key = ((uint64_t)a << 32 | b) + 1;
    for (size_t i = pmap_index(key, m->mask);; i = (i + 1) & m->mask) {
        if (m->slot[i].key == key)
            return &m->slot[i];
        if (!m->slot[i].key)
            return NULL;
    }
}

/* The map never grows: hf_pmap_init is given the most keys it will hold. */
void hf_pmap_set(struct pmap *m, uint32_t a, uint32_t b, uint32_t rank, uint32_t id)
{
    uint64_t key = ((uint64_t)a << 32 | b) + 1;
    size_t i = pmap_index(key, m->mask);
    while (m->slot[i].key && m->slot[i].key != key)
        i = (i + 1) & m->mask;
    m->slot[i] = (struct pmap_slot){key, rank, id};
}
