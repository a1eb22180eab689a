/* hf_unicode: UTF-8, the character classes of the split regexes and of
 * added tokens, and NFC, over the generated unicode_tables.h
 * (scripts/gen_unicode_tables.py says where each table comes from). A byte
 * that is not valid UTF-8 is one character of no class, which NFC keeps.
 * Owns no state. */
#include "tokenizer_hf.h"

#include "unicode_tables.h"
#include "vktrain/util.h"

#include <string.h>

uint32_t hf_utf8_next(const unsigned char *s, size_t n, size_t *len)
{
    unsigned c = s[0];
    *len = 1;
    if (c < 0x80)
        return c;
    size_t k;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf)
        k = 1, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
        k = 2, cp = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4)
        k = 3, cp = c & 0x07, min = 0x10000;
    else
        return UTF8_INVALID;
    if (k >= n)
        return UTF8_INVALID;
    for (size_t i = 1; i <= k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return UTF8_INVALID;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return UTF8_INVALID;
    *len = k + 1;
    return cp;
}

size_t hf_put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The index of the range holding cp in a sorted table of inclusive
 * ranges (rows of `width` values, the range first), or -1. */
static long find_range(const uint32_t *t, size_t n, size_t width, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < t[mid * width])
            hi = mid;
        else if (cp > t[mid * width + 1])
            lo = mid + 1;
        else
            return (long)mid;
    }
    return -1;
}

#define IN(t, cp) (find_range(&t[0][0], sizeof t / sizeof t[0], 2, cp) >= 0)

int hf_class(uint32_t cp)
{
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z')
            return C_LETTER;
        if (cp >= '0' && cp <= '9')
            return C_NUMBER;
        if (cp == ' ' || (cp >= 9 && cp <= 13))
            return C_SPACE;
        return C_OTHER;
    }
    if (cp == UTF8_INVALID)
        return C_OTHER;
    if (IN(uni_letter, cp))
        return C_LETTER;
    if (IN(uni_number, cp))
        return C_NUMBER;
    if (IN(uni_space, cp))
        return C_SPACE;
    return C_OTHER;
}

int hf_case(uint32_t cp)
{
    if (cp < 0x80)
        return cp >= 'A' && cp <= 'Z' ? K_UPPER : cp >= 'a' && cp <= 'z' ? K_LOWER : K_NONE;
    if (cp == UTF8_INVALID)
        return K_NONE;
    if (IN(uni_upper, cp))
        return K_UPPER;
    if (IN(uni_lower, cp))
        return K_LOWER;
    if (IN(uni_mark, cp))
        return K_MARK;
    return IN(uni_letter, cp) ? K_OTHER_LETTER : K_NONE;
}

int tokenizer_hf_class(uint32_t cp)
{
    return "LNSO"[hf_class(cp)];
}

bool hf_is_word(uint32_t cp)
{
    if (cp < 0x80)
        return ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') || (cp >= '0' && cp <= '9') || cp == '_';
    return cp != UTF8_INVALID && IN(uni_word, cp);
}

/* ---- NFC (UAX #15): decompose, order marks, compose ---- */

enum {
    HANGUL_S = 0xac00, HANGUL_L = 0x1100, HANGUL_V = 0x1161, HANGUL_T = 0x11a7,
    HANGUL_NV = 21, HANGUL_NT = 28, HANGUL_N = 11172,
};

static uint32_t ccc(uint32_t cp)
{
    if (cp < 0x300 || cp == UTF8_INVALID)
        return 0;
    long i = find_range(&uni_ccc[0][0], sizeof uni_ccc / sizeof uni_ccc[0], 3, cp);
    return i < 0 ? 0 : uni_ccc[i][2];
}

/* Whether NFC may change cp or join it to what precedes it; text splits
 * before any other character into parts NFC treats on their own. */
static bool nfc_unsafe(uint32_t cp)
{
    return cp >= 0x300 && cp != UTF8_INVALID && IN(uni_nfc_unsafe, cp);
}

/* Appends the full canonical decomposition of cp to d. */
static size_t decompose(uint32_t cp, uint32_t *d)
{
    if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_N) {
        uint32_t s = cp - HANGUL_S, t = s % HANGUL_NT;
        d[0] = HANGUL_L + s / (HANGUL_NV * HANGUL_NT);
        d[1] = HANGUL_V + s % (HANGUL_NV * HANGUL_NT) / HANGUL_NT;
        if (!t)
            return 2;
        d[2] = HANGUL_T + t;
        return 3;
    }
    size_t lo = 0, hi = sizeof uni_decomp / sizeof uni_decomp[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < uni_decomp[mid][0])
            hi = mid;
        else if (cp > uni_decomp[mid][0])
            lo = mid + 1;
        else {
            memcpy(d, uni_decomp_pool + uni_decomp[mid][1], uni_decomp[mid][2] * sizeof *d);
            return uni_decomp[mid][2];
        }
    }
    d[0] = cp;
    return 1;
}

/* The primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b)
{
    if (a >= HANGUL_L && a < HANGUL_L + 19 && b >= HANGUL_V && b < HANGUL_V + HANGUL_NV)
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_NV + (b - HANGUL_V)) * HANGUL_NT;
    if (a >= HANGUL_S && a < HANGUL_S + HANGUL_N && (a - HANGUL_S) % HANGUL_NT == 0 && b > HANGUL_T &&
        b < HANGUL_T + HANGUL_NT)
        return a + (b - HANGUL_T);
    size_t lo = 0, hi = sizeof uni_compose / sizeof uni_compose[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint32_t *r = uni_compose[mid];
        if (a < r[0] || (a == r[0] && b < r[1]))
            hi = mid;
        else if (a > r[0] || b > r[1])
            lo = mid + 1;
        else
            return r[2];
    }
    return 0;
}

/* NFC of one part (a safe character, then unsafe ones) into out; returns
 * the bytes written. d: scratch of 4 code points per input byte. */
static size_t nfc_part(const unsigned char *s, size_t n, uint32_t *d, char *out)
{
    size_t m = 0, o = 0;
    for (size_t i = 0; i < n;) {
        size_t len;
        uint32_t cp = hf_utf8_next(s + i, n - i, &len);
        if (cp == UTF8_INVALID) {
            d[m++] = 0x80000000u | s[i]; /* an invalid byte, kept */
        } else {
            size_t k = decompose(cp, d + m);
            /* canonical order: a mark moves before marks of a higher class */
            for (size_t j = m; j < m + k; j++) {
                uint32_t c = d[j], cc = ccc(c);
                size_t p = j;
                while (cc && p > 0 && !(d[p - 1] & 0x80000000u) && ccc(d[p - 1]) > cc) {
                    d[p] = d[p - 1];
                    p--;
                }
                d[p] = c;
            }
            m += k;
        }
        i += len;
    }
    /* compose: each character with the last starter unless blocked */
    size_t w = 0;
    long starter = -1;
    for (size_t j = 0; j < m; j++) {
        uint32_t c = d[j];
        uint32_t cc = c & 0x80000000u ? 0 : ccc(c);
        if (starter >= 0 && !(c & 0x80000000u) && ((size_t)starter == w - 1 || ccc(d[w - 1]) < cc)) {
            uint32_t comp = compose(d[starter], c);
            if (comp) {
                d[starter] = comp;
                continue;
            }
        }
        if (cc == 0)
            starter = c & 0x80000000u ? -1 : (long)w;
        d[w++] = c;
    }
    for (size_t j = 0; j < w; j++)
        if (d[j] & 0x80000000u)
            out[o++] = (char)(d[j] & 0xff);
        else
            o += hf_put_utf8(out + o, d[j]);
    return o;
}

size_t hf_nfc(const char *text, size_t n, char **buf, size_t *cap, const char **out)
{
    const unsigned char *s = (const unsigned char *)text;
    /* the text up to the first unsafe character stays; part: where the
     * part holding that character starts (the safe character before it) */
    size_t i = 0, part = 0;
    while (i < n) {
        size_t len = 1;
        if (s[i] >= 0x80 && nfc_unsafe(hf_utf8_next(s + i, n - i, &len)))
            break;
        part = i;
        i += len;
    }
    if (i == n) {
        *out = text;
        return n;
    }
    /* buf: the NFC text (at most 3n bytes), then the code points of a
     * part (a character decomposes into at most 4) */
    size_t text_cap = (3 * n + 4) & ~(size_t)3, need = text_cap + 16 * n + 16;
    if (*cap < need) {
        *cap = need;
        *buf = vkt_realloc(*buf, need, "tokenizer text");
    }
    char *o = *buf;
    uint32_t *d = (uint32_t *)(void *)(o + text_cap);
    memcpy(o, s, part);
    size_t w = part;
    bool dirty = false;
    for (size_t j = part;;) {
        size_t len = 1;
        bool unsafe = j < n && nfc_unsafe(hf_utf8_next(s + j, n - j, &len));
        if (j == n || (!unsafe && j > part)) { /* a part ends before j */
            if (dirty) {
                w += nfc_part(s + part, j - part, d, o + w);
            } else {
                memcpy(o + w, s + part, j - part);
                w += j - part;
            }
            if (j == n)
                break;
            part = j;
            dirty = false;
        }
        dirty |= unsafe;
        j += len;
    }
    *out = o;
    return w;
}

size_t tokenizer_hf_nfc(const char *s, size_t n, char *out)
{
    char *buf = NULL;
    size_t cap = 0;
    const char *r;
    size_t len = hf_nfc(s, n, &buf, &cap, &r);
    memcpy(out, r, len);
    free(buf);
    return len;
}
