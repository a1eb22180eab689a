/* model_bnb: the layers' matrices of a bitsandbytes 4-bit folder (saved
 * by transformers with BitsAndBytesConfig(load_in_4bit=True)), uploaded as
 * they are stored: no dequantization, no requantization.
 *
 * transformers writes each Linear4bit's weight W as the tensors
 *   W                               U8 [ceil(n / 2), 1]: the packed nibbles
 *   W.absmax                        F32 [blocks], or U8 with double quantization
 *   W.quant_map                     F32 [16]: the 4-bit code
 *   W.nested_absmax                 F32 [ceil(blocks / 256)]   (double quantization)
 *   W.nested_quant_map              F32 [256]: the 8-bit code  (double quantization)
 *   W.quant_state.bitsandbytes__nf4 U8: JSON {quant_type, blocksize, dtype,
 *                                   shape, nested_blocksize, nested_offset, ...}
 *   (..__fp4 for FP4)
 * in the order of the state dict, which a shard boundary may cut: the
 * parts of a weight are held until all have come, then it is uploaded.
 * GPT-2's Conv1D weights are quantized transposed ((out, in), vktrain's
 * layout). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <math.h>

#include "model_internal.h"
#include "vktrain/hfconfig.h"
#include "vktrain/quant4.h"
#include "vktrain/safetensors.h"
#include "vktrain/util.h"

enum { P_WEIGHT, P_ABSMAX, P_QMAP, P_NESTED, P_NMAP, P_STATE_NF4, P_STATE_FP4, P_N };
static const char *const suffix[P_N] = {"",
                                        ".absmax",
                                        ".quant_map",
                                        ".nested_absmax",
                                        ".nested_quant_map",
                                        ".quant_state.bitsandbytes__nf4",
                                        ".quant_state.bitsandbytes__fp4"};

struct bnb_pending {
    struct st_tensor t[P_N];
    int have[P_N];
    char path[4096]; /* the file of the weight's first part, for messages */
};

struct bnb_loader {
    struct model *m;
    struct bnb_pending **pending; /* per parameter, NULL until a part comes */
};

struct bnb_loader *bnb_loader_new(struct model *m)
{
    struct bnb_loader *L = vkt_calloc(1, sizeof *L, "bitsandbytes loader");
    L->m = m;
    L->pending = vkt_calloc((size_t)m->n_params, sizeof *L->pending, "bitsandbytes loader");
    return L;
}

int bnb_part_of(const char *name, char *base, size_t cap)
{
    size_t n = strlen(name);
    for (int s = P_ABSMAX; s < P_N; s++) {
        size_t k = strlen(suffix[s]);
        if (n > k && n - k < cap && !strcmp(name + n - k, suffix[s])) {
            memcpy(base, name, n - k);
            base[n - k] = 0;
            return s;
        }
    }
    return -1;
}

static void pending_free(struct bnb_pending *q)
{
    if (!q)
        return;
    for (int s = 0; s < P_N; s++) {
        free(q->t[s].data);
        free(q->t[s].bytes);
    }
    free(q);
}

/* The quantization state's JSON (a U8 tensor of UTF-8), checked against
 * the weight p and the folder's config; fills w's block, code and
 * rounding, and nested/offset. */
static int read_state(const struct model *m, const struct model_param *p, const struct bnb_pending *q, int s,
                      struct q4_bnb *w, int *nested, char *err, size_t errlen)
{
    const struct st_tensor *t = &q->t[s];
    const char *what = t->name;
    if (!t->bytes)
        return vkt_error(err, errlen, "%s: tensor '%s' is not U8 (the JSON of a quantization state)", q->path, what);
    json_error_t jerr;
    json_t *j = json_loadb((const char *)t->bytes, (size_t)st_numel(t), 0, &jerr);
    int rc = -1;
    json_t *type = json_object_get(j, "quant_type"), *bs = json_object_get(j, "blocksize"),
           *dt = json_object_get(j, "dtype"), *shape = json_object_get(j, "shape"),
           *nbs = json_object_get(j, "nested_blocksize"), *off = json_object_get(j, "nested_offset");
    const char *dts = json_string_value(dt), *want_type = s == P_STATE_NF4 ? "nf4" : "fp4";
    if (!j)
        vkt_error(err, errlen, "%s: tensor '%s': not JSON: %s", q->path, what, jerr.text);
    else if (!json_is_object(j))
        vkt_error(err, errlen, "%s: tensor '%s': not a JSON object", q->path, what);
    else if (!json_is_string(type) || strcmp(json_string_value(type), want_type))
        vkt_error(err, errlen, "%s: tensor '%s': quant_type is not '%s'", q->path, what, want_type);
    else if ((m->c.base_bnb4 == HF_BNB_FP4) != (s == P_STATE_FP4))
        vkt_error(err, errlen, "%s: tensor '%s' is %s, but config.json's bnb_4bit_quant_type is %s", q->path, what,
                  want_type, m->c.base_bnb4 == HF_BNB_FP4 ? "fp4" : "nf4");
    else if (!json_is_integer(bs) || json_integer_value(bs) != NF4_BLOCK)
        vkt_error(err, errlen, "%s: tensor '%s': blocksize %lld (blocks of %u are read, transformers' only)", q->path,
                  what, json_is_integer(bs) ? (long long)json_integer_value(bs) : -1LL, NF4_BLOCK);
    else if (!dts || (strcmp(dts, "float32") && strcmp(dts, "bfloat16") && strcmp(dts, "float16")))
        vkt_error(err, errlen, "%s: tensor '%s': dtype '%s' (float32, bfloat16 and float16 are read)", q->path, what,
                  dts ? dts : "(not a string)");
    else if (!json_is_array(shape) || json_array_size(shape) != 2 ||
             json_integer_value(json_array_get(shape, 0)) != (json_int_t)p->hf_rows ||
             json_integer_value(json_array_get(shape, 1)) != (json_int_t)p->shape[1])
        vkt_error(err, errlen, "%s: tensor '%s': its shape is not the model's (%u, %u)", q->path, what, p->hf_rows,
                  p->shape[1]);
    else if (nbs && (!json_is_integer(nbs) || json_integer_value(nbs) != Q4_NESTED_BLOCK || !json_is_number(off)))
        vkt_error(err, errlen, "%s: tensor '%s': double quantization needs nested_blocksize %u and a nested_offset",
                  q->path, what, Q4_NESTED_BLOCK);
    else if ((nbs != NULL) != (m->c.base_nf4_double != 0))
        vkt_error(err, errlen,
                  "%s: tensor '%s' is %s double quantization, unlike config.json's "
                  "bnb_4bit_use_double_quant",
                  q->path, what, nbs ? "with" : "without");
    else
        rc = 0;
    if (!rc) {
        w->block = NF4_BLOCK;
        w->code = s == P_STATE_FP4 ? Q4_FP4 : Q4_NF4;
        w->round = !strcmp(dts, "bfloat16") ? Q4_FLAG_BF16 : !strcmp(dts, "float16") ? Q4_FLAG_F16 : 0;
        *nested = nbs != NULL;
        w->offset = nbs ? (float)json_number_value(off) : 0.0f;
    }
    json_decref(j);
    return rc;
}

/* Tensor q->t[s] has `want` elements, of U8 bytes (u8) or floats. */
static int check_size(const struct bnb_pending *q, int s, int u8, size_t want, char *err, size_t errlen)
{
    const struct st_tensor *t = &q->t[s];
    if (u8 != (t->bytes != NULL))
        return vkt_error(err, errlen, "%s: tensor '%s' is %s, a bitsandbytes weight's needs %s", q->path, t->name,
                         t->bytes ? "U8" : "floating point", u8 ? "U8" : "F32");
    if ((size_t)st_numel(t) != want)
        return vkt_error(err, errlen, "%s: tensor '%s' has %lld elements, %zu expected for the model's shape", q->path,
                         t->name, (long long)st_numel(t), want);
    return 0;
}

/* The weight p (with its fused parts) once every tensor has come: checked
 * and uploaded part by part. 1 when not complete yet. */
static int complete(struct bnb_loader *L, int i, int *found, char *err, size_t errlen)
{
    struct model *m = L->m;
    struct model_param *p = &m->params[i];
    struct bnb_pending *q = L->pending[i];
    int s = q->have[P_STATE_NF4] ? P_STATE_NF4 : P_STATE_FP4, nested = 0;
    if (!q->have[P_WEIGHT] || !q->have[P_ABSMAX] || !q->have[P_QMAP] || !q->have[s])
        return 1;
    struct q4_bnb w = {0};
    if (read_state(m, p, q, s, &w, &nested, err, errlen))
        return -1;
    if (nested && (!q->have[P_NESTED] || !q->have[P_NMAP]))
        return 1;
    size_t n = (size_t)p->hf_rows * p->shape[1], blocks = (n + NF4_BLOCK - 1) / NF4_BLOCK;
    if (check_size(q, P_WEIGHT, 1, (n + 1) / 2, err, errlen) || check_size(q, P_ABSMAX, nested, blocks, err, errlen) ||
        check_size(q, P_QMAP, 0, 16, err, errlen) ||
        (nested && (check_size(q, P_NESTED, 0, (blocks + Q4_NESTED_BLOCK - 1) / Q4_NESTED_BLOCK, err, errlen) ||
                    check_size(q, P_NMAP, 0, 256, err, errlen))))
        return -1;
    /* bitsandbytes' kernels decode with their own tables, not quant_map:
     * a folder whose map differs would not mean what it says */
    const float *code = q4_code(w.code);
    for (int k = 0; k < 16; k++)
        if (q->t[P_QMAP].data[k] != code[k])
            return vkt_error(err, errlen, "%s: tensor '%s': entry %d is %.9g, bitsandbytes' %s code has %.9g", q->path,
                             q->t[P_QMAP].name, k, (double)q->t[P_QMAP].data[k], w.code == Q4_FP4 ? "FP4" : "NF4",
                             (double)code[k]);
    w.packed = q->t[P_WEIGHT].bytes;
    if (nested) {
        w.absmax8 = q->t[P_ABSMAX].bytes, w.nested = q->t[P_NESTED].data, w.code8 = q->t[P_NMAP].data;
    } else {
        w.absmax = q->t[P_ABSMAX].data;
    }
    const float *scales = nested ? w.nested : w.absmax;
    size_t n_scales = nested ? (size_t)st_numel(&q->t[P_NESTED]) : blocks;
    for (size_t k = 0; k < n_scales; k++)
        if (!isfinite(scales[k]))
            return vkt_error(err, errlen, "%s: tensor '%s': element %zu is %g", q->path,
                             q->t[nested ? P_NESTED : P_ABSMAX].name, k, (double)scales[k]);
    for (int k = i, e = i + model_fused_parts(m, i); k < e; k++) {
        struct model_param *part = &m->params[k];
        size_t e0 = (size_t)part->hf_row0 * part->shape[1], align = NF4_BLOCK * (nested ? Q4_NESTED_BLOCK : 1);
        if (e0 % align)
            return vkt_error(err, errlen,
                             "%s: tensor '%s': its part %s starts at element %zu, not on a boundary of %zu elements "
                             "(its blocks%s): not read",
                             q->path, p->hf, part->name, e0, align, nested ? " and their 256-block groups" : "");
        size_t bytes = gpu_buffer_size(part->w);
        uint32_t *buf = vkt_malloc(bytes, part->name);
        q4_from_bnb(buf, &w, e0, part->numel);
        gpu_buffer_set_q4_flags(part->w, buf[Q4_W_FLAGS]);
        gpu_upload(m->g, part->w, 0, buf, bytes);
        free(buf);
        found[k] = 1;
    }
    pending_free(q);
    L->pending[i] = NULL;
    return 0;
}

int bnb_take(struct bnb_loader *L, struct model_param *p, int part, struct st_tensor *t, const char *path, int *found,
             char *err, size_t errlen)
{
    int i = (int)(p - L->m->params);
    if (part < 0)
        part = P_WEIGHT;
    if (!p->q4)
        return vkt_error(err, errlen, "%s: tensor '%s': a quantization state of '%s', which is not a layer's matrix",
                         path, t->name, p->hf);
    if (part == P_WEIGHT && !t->bytes)
        return vkt_error(err, errlen,
                         "%s: tensor '%s' is in full precision in a bitsandbytes 4-bit folder (a module its "
                         "llm_int8_skip_modules kept): vktrain reads every layer's matrices quantized",
                         path, t->name);
    if (found[i])
        return vkt_error(err, errlen, "%s: tensor '%s' is stored twice", path, t->name);
    struct bnb_pending *q = L->pending[i];
    if (!q) {
        q = L->pending[i] = vkt_calloc(1, sizeof *q, "bitsandbytes weight");
        snprintf(q->path, sizeof q->path, "%s", path);
    }
    if (q->have[part])
        return vkt_error(err, errlen, "%s: tensor '%s' is stored twice", path, t->name);
    q->t[part] = *t; /* moved: the file's copy no longer owns the buffers */
    t->data = NULL, t->bytes = NULL;
    q->have[part] = 1;
    return complete(L, i, found, err, errlen) < 0 ? -1 : 0;
}

int bnb_finish(struct bnb_loader *L, char *err, size_t errlen)
{
    int rc = 0;
    for (int i = 0; i < L->m->n_params; i++) {
        struct bnb_pending *q = L->pending[i];
        if (q && !rc) {
            int s = 0;
            while (s < P_N && (q->have[s] || s == P_NESTED || s == P_NMAP || s >= P_STATE_NF4))
                s++;
            if (s == P_N) /* the state says double quantization, or none came */
                s = !q->have[P_STATE_NF4] && !q->have[P_STATE_FP4]
                        ? (L->m->c.base_bnb4 == HF_BNB_FP4 ? P_STATE_FP4 : P_STATE_NF4)
                    : !q->have[P_NESTED] ? P_NESTED
                                         : P_NMAP;
            rc = vkt_error(err, errlen, "%s: tensor '%s%s' is missing (a bitsandbytes 4-bit weight's part)", q->path,
                           L->m->params[i].hf, suffix[s]);
        }
        pending_free(q);
    }
    free(L->pending);
    free(L);
    return rc;
}
