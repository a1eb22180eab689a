/* model_io: the model's parameters to and from Hugging Face files
 * (model.safetensors + config.json), walking the one parameter table.
 * Transposes GPT-2 Conv1D weights between the HF (in, out) layout and the
 * internal (out, in) one. Never leaves a half-written file (the writers
 * in src/checkpoint are atomic). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "vktrain/hfconfig.h"
#include "vktrain/safetensors.h"
#include "vktrain/util.h"

static void transpose(float *dst, const float *src, uint32_t rows, uint32_t cols)
{
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t c = 0; c < cols; c++)
            dst[(size_t)c * rows + r] = src[(size_t)r * cols + c];
}

/* HF shape of a parameter: internal (out, in), or (in, out) when transposed. */
static void hf_shape(const struct model_param *p, int64_t shape[2])
{
    shape[0] = p->hf_transposed ? p->shape[1] : p->shape[0];
    shape[1] = p->hf_transposed ? p->shape[0] : p->shape[1];
}

int model_save(struct model *m, const char *dir, char *err, size_t errlen)
{
    int n = m->n_params;
    struct st_tensor *t = vkt_calloc((size_t)n, sizeof *t, "tensor list");
    for (int i = 0; i < n; i++) {
        struct model_param *p = &m->params[i];
        snprintf(t[i].name, sizeof t[i].name, "%s", p->name);
        t[i].ndim = p->ndim;
        hf_shape(p, t[i].shape);
        float *host = vkt_malloc(p->numel * sizeof(float), p->name);
        gpu_download(m->g, p->w, 0, host, p->numel * sizeof(float));
        if (p->hf_transposed) {
            t[i].data = vkt_malloc(p->numel * sizeof(float), p->name);
            transpose(t[i].data, host, p->shape[0], p->shape[1]);
            free(host);
        } else {
            t[i].data = host;
        }
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = st_write(path, t, n, "{\"format\":\"pt\"}", err, errlen);
    for (int i = 0; i < n; i++)
        free(t[i].data);
    free(t);
    if (rc)
        return rc;
    const struct model_config *c = &m->c;
    struct hf_config h = {
        .arch = c->arch == MODEL_LLAMA ? HF_LLAMA : HF_GPT2, .vocab_size = (int)c->vocab_size, .dim = (int)c->dim,
        .n_layers = (int)c->n_layers, .n_heads = (int)c->n_heads, .n_kv_heads = (int)c->n_kv_heads,
        .hidden_dim = (int)c->hidden_dim, .max_seq_len = (int)c->max_seq_len, .norm_eps = c->norm_eps,
        .rope_theta = c->arch == MODEL_LLAMA ? c->rope_theta : 0, .tie_embeddings = c->tie_embeddings,
        .bos_token_id = c->vocab_size > 256 ? 256 : -1, .eos_token_id = c->vocab_size > 257 ? 257 : -1,
        .pad_token_id = c->vocab_size > 258 ? 258 : -1,
    };
    snprintf(path, sizeof path, "%s/config.json", dir);
    return hf_config_write(path, &h, err, errlen);
}

static int ignored_buffer(const char *name)
{
    static const char *suffixes[] = {"attn.bias", "attn.masked_bias", "rotary_emb.inv_freq"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        size_t k = strlen(suffixes[i]);
        if (n >= k && !strcmp(name + n - k, suffixes[i]) && (n == k || name[n - k - 1] == '.'))
            return 1;
    }
    return 0;
}

int model_load(struct model *m, const char *dir, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    struct st_file f;
    if (st_read(path, &f, err, errlen))
        return -1;
    int rc = 0;
    int *found = vkt_calloc((size_t)m->n_params, sizeof *found, "tensor matches");
    for (int i = 0; i < f.n && !rc; i++) {
        const struct st_tensor *t = &f.t[i];
        const char *name = t->name;
        if (m->c.arch == MODEL_GPT2 && !strncmp(name, "transformer.", 12))
            name += 12;
        struct model_param *p = model_param_find(m, name);
        if (!p) {
            /* a tied head stored explicitly is ignored: the embedding is the head */
            if (ignored_buffer(name) || (m->c.tie_embeddings && !strcmp(name, "lm_head.weight")))
                continue;
            snprintf(err, errlen, "%s: tensor '%s' is not a parameter of this %s model", path, t->name,
                     m->c.arch == MODEL_LLAMA ? "llama" : "gpt2");
            rc = -1;
            break;
        }
        int64_t want[2];
        hf_shape(p, want);
        if (t->ndim != p->ndim || t->shape[0] != want[0] || (p->ndim == 2 && t->shape[1] != want[1])) {
            snprintf(err, errlen, "%s: tensor '%s' has shape [%lld%s%lld], the model needs [%lld%s%lld]", path,
                     t->name, (long long)t->shape[0], t->ndim > 1 ? ", " : "", t->ndim > 1 ? (long long)t->shape[1] : 0,
                     (long long)want[0], p->ndim > 1 ? ", " : "", p->ndim > 1 ? (long long)want[1] : 0);
            rc = -1;
            break;
        }
        if (p->hf_transposed) {
            float *tmp = vkt_malloc(p->numel * sizeof(float), p->name);
            transpose(tmp, t->data, (uint32_t)want[0], (uint32_t)want[1]);
            gpu_upload(m->g, p->w, 0, tmp, p->numel * sizeof(float));
            free(tmp);
        } else {
            gpu_upload(m->g, p->w, 0, t->data, p->numel * sizeof(float));
        }
        found[p - m->params] = 1;
    }
    for (int i = 0; i < m->n_params && !rc; i++)
        if (!found[i]) {
            snprintf(err, errlen, "%s: tensor '%s' is missing", path, m->params[i].name);
            rc = -1;
        }
    free(found);
    st_free(&f);
    return rc;
}

int model_config_read(const char *dir, struct model_config *c, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    struct hf_config h;
    if (hf_config_read(path, &h, err, errlen))
        return -1;
    memset(c, 0, sizeof *c);
    c->arch = h.arch == HF_LLAMA ? MODEL_LLAMA : MODEL_GPT2;
    c->vocab_size = (uint32_t)h.vocab_size, c->dim = (uint32_t)h.dim, c->n_layers = (uint32_t)h.n_layers;
    c->n_heads = (uint32_t)h.n_heads, c->n_kv_heads = (uint32_t)h.n_kv_heads, c->hidden_dim = (uint32_t)h.hidden_dim;
    c->max_seq_len = (uint32_t)h.max_seq_len, c->norm_eps = (float)h.norm_eps;
    c->rope_theta = h.rope_theta ? h.rope_theta : 10000.0, c->tie_embeddings = h.tie_embeddings;
    c->init_std = 0.02f;
    char why[512];
    if (model_config_check(c, 0, why, sizeof why))
        return vkt_error(err, errlen, "%s: %s", path, why);
    return 0;
}
