/* model_io: the model's parameters to and from Hugging Face files
 * (model.safetensors + config.json), walking the one parameter table.
 * Transposes GPT-2 Conv1D weights between the HF (in, out) layout and the
 * internal (out, in) one. Never leaves a half-written file (the writers
 * in src/formats are atomic). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

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

_Static_assert(sizeof((struct hf_config *)0)->rope_short == sizeof((struct op_rope_scaling *)0)->short_factor,
               "longrope's factors: one size in the config and the op");

/* How many parameters from k on make up tensor k's hf of the files: 1, or
 * the parts of a fused one (consecutive in the table). */
int model_fused_parts(const struct model *m, int k)
{
    int n = 1;
    while (k + n < m->n_params && m->params[k + n].hf_row0 && !strcmp(m->params[k + n].hf, m->params[k].hf))
        n++;
    return n;
}

/* The HF shape of tensor hf that parameter p starts. */
static void hf_tensor_shape(const struct model_param *p, int64_t shape[2])
{
    hf_shape(p, shape);
    if (p->hf_rows != p->shape[0])
        shape[0] = p->hf_rows;
}

/* The HF config of the model, for a fresh config.json. */
static struct hf_config hf_config_of(const struct model *m, const struct model_save_options *o)
{
    const struct model_config *c = &m->c;
    return (struct hf_config){
        .arch = c->arch == MODEL_LLAMA ? HF_LLAMA : HF_GPT2,
        .vocab_size = (int)c->vocab_size,
        .dim = (int)c->dim,
        .n_layers = (int)c->n_layers,
        .n_heads = (int)c->n_heads,
        .n_kv_heads = (int)c->n_kv_heads,
        .head_dim = (int)model_head_dim(c),
        .qk_norm = c->qk_norm,
        .sliding_window = (int)c->sliding_window,
        .full_layers = c->full_layers,
        .nope_layers = c->nope_layers,
        .fused_proj = c->fused_proj,
        .rotary_dim = (int)c->rotary_dim,
        .norm_offset = c->norm_offset,
        .post_norms = c->post_norms,
        .mlp_gelu = c->mlp_gelu,
        .embed_scale = c->embed_scale,
        .attn_scalar = c->attn_scalar,
        .rope_local_theta = c->rope_local_theta,
        .attn_softcap = c->attn_softcap,
        .final_softcap = c->final_softcap,
        .hidden_dim = (int)c->hidden_dim,
        .max_seq_len = (int)c->pos_rows,
        .norm_eps = c->norm_eps,
        .rope_theta = c->arch == MODEL_LLAMA ? c->rope_theta : 0,
        .tie_embeddings = c->tie_embeddings,
        .bos_token_id = o->bos,
        .eos_token_id = o->eos,
        .pad_token_id = o->pad,
        .save_bf16 = o->bf16,
    };
}

/* The tensors of a save, made one at a time as they are written: tensor i
 * is parameter param[i], downloaded, merged with its adapter when asked,
 * and transposed to the Hugging Face shape (through tmp, room for the
 * largest transposed one). first: the shard's first tensor. */
struct save_fill {
    struct model *m;
    const struct model_save_options *o;
    const int *param;
    int first;
    float *tmp;
};

static void merge_adapter(struct model *m, float *w, int ia, int ib);
static int adapter_of(const struct model *m, int i, int *a, int *b);

static void save_fill(void *ctx, int i, float *buf)
{
    struct save_fill *s = ctx;
    int k = s->param[s->first + i], n = model_fused_parts(s->m, k), ia, ib;
    for (int q = k; q < k + n; q++) { /* a fused tensor: each part's rows */
        struct model_param *p = &s->m->params[q];
        float *host = p->hf_transposed ? s->tmp : buf + (size_t)p->hf_row0 * p->shape[1];
        model_param_download(s->m, p, host);
        if (s->o->merged && adapter_of(s->m, q, &ia, &ib))
            merge_adapter(s->m, host, ia, ib);
        if (p->hf_transposed)
            transpose(buf, host, p->shape[0], p->shape[1]);
    }
}

/* Writes tensors [first, last) as path; bf16 or F32. */
static int write_shard(const char *path, struct st_tensor *t, int first, int last, struct save_fill *fill, char *err,
                       size_t errlen)
{
    fill->first = first;
    return st_write_fill(path, t + first, last - first, "{\"format\":\"pt\"}", fill->o->bf16, save_fill, fill, err,
                         errlen);
}

/* model.safetensors, or shards of at most shard_bytes (a larger tensor
 * alone) named as transformers names them, with model.safetensors.index.json. */
static int write_tensors(const char *dir, struct st_tensor *t, int n, struct save_fill *fill, char *err,
                         size_t errlen)
{
    const struct model_save_options *o = fill->o;
    size_t elem = o->bf16 ? 2 : sizeof(float), total = 0;
    int *shard = vkt_malloc((size_t)n * sizeof *shard, "shard list"), shards = 0;
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        size_t b = (size_t)st_numel(&t[i]) * elem;
        if (i == 0 || (o->shard_bytes && bytes + b > o->shard_bytes))
            shards++, bytes = 0;
        shard[i] = shards - 1;
        bytes += b;
        total += b;
    }
    char path[4096], index[4096];
    vkt_path(index, sizeof index, "%s/model.safetensors.index.json", dir);
    vkt_path(path, sizeof path, "%s/model.safetensors", dir);
    int rc = 0;
    if (shards <= 1) {
        unlink(index); /* an earlier sharded save would shadow this one */
        rc = write_shard(path, t, 0, n, fill, err, errlen);
        free(shard);
        return rc;
    }
    json_t *map = json_object();
    for (int s = 0, first = 0; s < shards && !rc; s++) {
        int last = first;
        while (last < n && shard[last] == s)
            last++;
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, shards);
        vkt_path(path, sizeof path, "%s/%s", dir, name);
        rc = write_shard(path, t, first, last, fill, err, errlen);
        for (int i = first; i < last; i++)
            json_object_set_new(map, t[i].name, json_string(name));
        first = last;
    }
    free(shard);
    if (!rc) {
        json_t *root = json_pack("{s{sI}so}", "metadata", "total_size", (json_int_t)total, "weight_map", map);
        char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(root);
        const void *bufs[] = {text, "\n"};
        const size_t lens[] = {strlen(text), 1};
        rc = ckpt_write_atomic(index, 2, bufs, lens, err, errlen);
        free(text);
        vkt_path(path, sizeof path, "%s/model.safetensors", dir);
        unlink(path); /* an earlier unsharded save would shadow this one */
    } else {
        json_decref(map);
    }
    return rc;
}

/* The adapter that changes base weight i (its A and B indices), if any. */
static int adapter_of(const struct model *m, int i, int *a, int *b)
{
    for (uint32_t l = 0; m->c.lora_rank && l < m->c.n_layers; l++) {
        const struct layer_params *p = &m->lp[l];
        int base[LS_N];
        model_linear_slots(p, base);
        for (int s = 0; s < LS_N; s++)
            if (base[s] == i && p->lora_a[s] >= 0) {
                *a = p->lora_a[s], *b = p->lora_b[s];
                return 1;
            }
    }
    return 0;
}

/* w (out, in) += scale·B (out, r)·A (r, in), each sum in double. */
static void merge_adapter(struct model *m, float *w, int ia, int ib)
{
    const struct model_param *pa = &m->params[ia], *pb = &m->params[ib];
    uint32_t r = pa->shape[0], in = pa->shape[1], out = pb->shape[0];
    float *a = vkt_malloc(pa->numel * sizeof(float), pa->name), *b = vkt_malloc(pb->numel * sizeof(float), pb->name);
    model_param_download(m, pa, a);
    model_param_download(m, pb, b);
    for (uint32_t o = 0; o < out; o++)
        for (uint32_t i = 0; i < in; i++) {
            double d = 0;
            for (uint32_t k = 0; k < r; k++)
                d += (double)b[(size_t)o * r + k] * a[(size_t)k * in + i];
            w[(size_t)o * in + i] += (float)(m->lora_scale * d);
        }
    free(a);
    free(b);
}

int model_save(struct model *m, const char *dir, const struct model_save_options *opts, char *err, size_t errlen)
{
    const struct model_save_options none = {.bos = -1, .eos = -1, .pad = -1};
    const struct model_save_options *o = opts ? opts : &none;
    struct st_tensor *t = vkt_calloc((size_t)m->n_params, sizeof *t, "tensor list");
    int *param = vkt_malloc((size_t)m->n_params * sizeof *param, "tensor list"), n = 0;
    size_t most = 1;
    for (int i = 0; i < m->n_params; i++) {
        struct model_param *p = &m->params[i];
        if (p->adapter || p->hf_row0) /* the later parts of a fused tensor: written with its first */
            continue;
        param[n] = i;
        struct st_tensor *s = &t[n++];
        snprintf(s->name, sizeof s->name, "%s", p->hf);
        s->ndim = p->ndim;
        hf_tensor_shape(p, s->shape);
        if (p->hf_transposed && p->numel > most)
            most = p->numel;
    }
    /* One tensor on the host at a time (the save of a large model would
     * otherwise double the process's memory at its end). */
    struct save_fill fill = {.m = m, .o = o, .param = param, .tmp = vkt_malloc(most * sizeof(float), "transpose")};
    int rc = write_tensors(dir, t, n, &fill, err, errlen);
    free(fill.tmp);
    free(param);
    free(t);
    if (rc)
        return rc;
    char path[4096];
    vkt_path(path, sizeof path, "%s/config.json", dir);
    struct hf_config h = hf_config_of(m, o);
    return o->source_config ? hf_config_write_from(path, o->source_config, &h, err, errlen)
                            : hf_config_write(path, &h, err, errlen);
}

/* "[a, b, ...]" */
static void shape_text(char *out, size_t n, const int64_t *shape, int ndim)
{
    size_t k = (size_t)snprintf(out, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(out + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n)
        snprintf(out + k, n - k, "]");
}

/* The shortest decimal that reads back as float f (0.1, not 0.100000001). */
static double float_decimal(float f)
{
    char text[32];
    for (int prec = 1; prec <= 9; prec++) { /* 9 digits always read back */
        snprintf(text, sizeof text, "%.*g", prec, (double)f);
        if ((float)strtod(text, NULL) == f)
            break;
    }
    return strtod(text, NULL);
}

/* adapter_model.safetensors: the adapters as PEFT stores them, A (r, in)
 * and B (out, r) for Linear and Conv1D alike (fan_in_fan_out transposes
 * only the merged delta). */
int model_adapter_save(struct model *m, const char *dir, const char *base, char *err, size_t errlen)
{
    const struct model_config *c = &m->c;
    struct st_tensor *t = vkt_calloc((size_t)m->n_params, sizeof *t, "tensor list");
    json_t *targets = json_array();
    int n = 0;
    for (int i = 0; i < m->n_params; i++) {
        struct model_param *p = &m->params[i];
        if (!p->adapter || p->hf_row0)
            continue;
        struct st_tensor *s = &t[n++];
        snprintf(s->name, sizeof s->name, "%s", p->hf);
        s->ndim = 2;
        s->shape[0] = p->hf_rows, s->shape[1] = p->shape[1];
        s->data = vkt_malloc((size_t)p->hf_rows * p->shape[1] * sizeof(float), p->hf);
        for (int q = i; q < i + model_fused_parts(m, i); q++)
            model_param_download(m, &m->params[q], s->data + (size_t)m->params[q].hf_row0 * p->shape[1]);
    }
    for (int k = 0; k < c->lora_n_targets; k++)
        json_array_append_new(targets, json_string(c->lora_targets[k]));
    char path[4096];
    vkt_path(path, sizeof path, "%s/adapter_model.safetensors", dir);
    int rc = st_write(path, t, n, "{\"format\":\"pt\"}", err, errlen);
    for (int i = 0; i < n; i++)
        free(t[i].data);
    free(t);
    json_t *j =
        json_pack("{s:s, s:s, s:i, s:f, s:f, s:o, s:b, s:s, s:o, s:b, s:b, s:b, s:b}", "peft_type", "LORA", "task_type",
                  "CAUSAL_LM", "r", (int)c->lora_rank, "lora_alpha", (double)c->lora_alpha, "lora_dropout",
                  float_decimal(c->lora_dropout), "target_modules", targets, "fan_in_fan_out", c->arch == MODEL_GPT2,
                  "bias", "none", "base_model_name_or_path", base ? json_string(base) : json_null(), "inference_mode",
                  1, "init_lora_weights", 1, "use_rslora", 0, "use_dora", 0);
    if (!rc) {
        char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        const void *bufs[] = {text, "\n"};
        const size_t lens[] = {strlen(text), 1};
        vkt_path(path, sizeof path, "%s/adapter_config.json", dir);
        rc = ckpt_write_atomic(path, 2, bufs, lens, err, errlen);
        free(text);
    }
    json_decref(j);
    return rc;
}

int model_adapter_load(struct model *m, const char *dir, char *err, size_t errlen)
{
    char path[4096];
    vkt_path(path, sizeof path, "%s/adapter_model.safetensors", dir);
    struct st_file f;
    if (st_read(path, &f, err, errlen))
        return -1;
    int *found = vkt_calloc((size_t)m->n_params, sizeof *found, "tensor matches"), rc = 0;
    for (int i = 0; i < f.n && !rc; i++) {
        const struct st_tensor *t = &f.t[i];
        struct model_param *p = model_param_find_hf(m, t->name);
        if (!p || !p->adapter)
            rc = vkt_error(err, errlen,
                           "%s: tensor '%s' is not an adapter of this model (lora.targets and the "
                           "model must match the adapter's)",
                           path, t->name);
        else if (t->ndim != 2 || t->shape[0] != p->hf_rows || t->shape[1] != p->shape[1])
            rc = vkt_error(err, errlen, "%s: tensor '%s' has shape [%lld, %lld], the model needs [%u, %u]", path,
                           t->name, (long long)t->shape[0], t->ndim > 1 ? (long long)t->shape[1] : 0, p->hf_rows,
                           p->shape[1]);
        else if (found[p - m->params])
            rc = vkt_error(err, errlen, "%s: tensor '%s' is stored twice", path, t->name);
        else
            for (int q = (int)(p - m->params), n = model_fused_parts(m, q), e = q + n; q < e; q++) {
                model_param_upload(m, &m->params[q], t->data + (size_t)m->params[q].hf_row0 * p->shape[1]);
                found[q] = 1;
            }
    }
    for (int i = 0; i < m->n_params && !rc; i++)
        if (m->params[i].adapter && !found[i])
            rc = vkt_error(err, errlen, "%s: adapter '%s' is missing", path, m->params[i].hf);
    free(found);
    st_free(&f);
    return rc;
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

/* The name of a multimodal Gemma 3's tensor in its text model, as
 * transformers saves it (language_model.model.*, language_model.lm_head;
 * from 4.52 on model.language_model.*), in buf as needed; NULL for the
 * vision tower's and the projector's, which are passed by. */
static const char *text_model_name(const char *name, char *buf, size_t cap)
{
    static const char *const not_text[] = {"vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                                           "model.multi_modal_projector."};
    for (size_t k = 0; k < sizeof not_text / sizeof *not_text; k++)
        if (!strncmp(name, not_text[k], strlen(not_text[k])))
            return NULL;
    if (!strncmp(name, "language_model.", 15))
        return name + 15;
    if (!strncmp(name, "model.language_model.", 21) && strlen(name) < cap - 6) {
        snprintf(buf, cap, "model.%s", name + 21);
        return buf;
    }
    return name;
}

/* Loads the tensors of one safetensors file, marking the parameters found;
 * multimodal: the folder is a multimodal Gemma 3's (text_model_name). */
static int load_file(struct model *m, const char *path, int multimodal, struct bnb_loader *bnb, int *found, char *err,
                     size_t errlen)
{
    struct st_file f;
    if (bnb ? st_read_u8(path, &f, err, errlen) : st_read(path, &f, err, errlen))
        return -1;
    int rc = 0;
    for (int i = 0; i < f.n && !rc; i++) {
        struct st_tensor *t = &f.t[i];
        const char *name = t->name;
        char text_name[512], base[ST_NAME_MAX];
        if (m->c.arch == MODEL_GPT2 && !strncmp(name, "transformer.", 12))
            name += 12;
        if (multimodal && !(name = text_model_name(name, text_name, sizeof text_name)))
            continue;
        int part = bnb ? bnb_part_of(name, base, sizeof base) : -1;
        struct model_param *p = model_param_find_hf(m, part >= 0 ? base : name);
        if (p && p->adapter)
            p = NULL;
        if (p && (p->q4 || part >= 0) && bnb) { /* a bitsandbytes weight or a part of its state */
            rc = bnb_take(bnb, p, part, t, path, found, err, errlen);
            continue;
        }
        if (t->bytes) {
            snprintf(err, errlen, "%s: tensor '%s' is U8: only a layer's matrix is stored so in a bitsandbytes 4-bit "
                     "folder", path, t->name);
            rc = -1;
            break;
        }
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
        hf_tensor_shape(p, want);
        if (t->ndim != p->ndim || t->shape[0] != want[0] || (p->ndim == 2 && t->shape[1] != want[1])) {
            char has[96], needs[96];
            shape_text(has, sizeof has, t->shape, t->ndim);
            shape_text(needs, sizeof needs, want, p->ndim);
            snprintf(err, errlen, "%s: tensor '%s' has shape %s, the model needs %s", path, t->name, has, needs);
            rc = -1;
            break;
        }
        if (found[p - m->params]) {
            snprintf(err, errlen, "%s: tensor '%s' is stored twice", path, t->name);
            rc = -1;
            break;
        }
        if (p->hf_transposed) {
            float *tmp = vkt_malloc(p->numel * sizeof(float), p->name);
            transpose(tmp, t->data, (uint32_t)want[0], (uint32_t)want[1]);
            model_param_upload(m, p, tmp);
            free(tmp);
            found[p - m->params] = 1;
        } else { /* a fused tensor: each part's rows */
            for (int q = (int)(p - m->params), e = q + model_fused_parts(m, q); q < e; q++) {
                model_param_upload(m, &m->params[q], t->data + (size_t)m->params[q].hf_row0 * p->shape[1]);
                found[q] = 1;
            }
        }
    }
    st_free(&f);
    return rc;
}

/* The shard files model.safetensors.index.json names, each once, in order
 * of first appearance; plain file names only. */
static int index_files(const char *index, char ***files, int *n, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *root = json_load_file(index, 0, &jerr);
    json_t *map = json_object_get(root, "weight_map");
    *files = NULL, *n = 0;
    if (!json_is_object(map)) {
        vkt_error(err, errlen, "%s: %s", index, root ? "no \"weight_map\" object" : jerr.text);
        json_decref(root);
        return -1;
    }
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(map, key, v)
    {
        const char *file = json_string_value(v);
        if (!file || !*file || strchr(file, '/') || !strcmp(file, "..") || !strcmp(file, ".")) {
            rc = vkt_error(err, errlen, "%s: weight_map['%s'] is not a file name in the folder", index, key);
            break;
        }
        int seen = 0;
        for (int i = 0; i < *n && !seen; i++)
            seen = !strcmp((*files)[i], file);
        if (!seen) {
            *files = vkt_realloc(*files, (size_t)(*n + 1) * sizeof **files, "shard list");
            (*files)[(*n)++] = vkt_strdup(file);
        }
    }
    json_decref(root);
    return rc;
}

int model_load(struct model *m, const char *dir, char *err, size_t errlen)
{
    char path[4096], index[4096];
    vkt_path(index, sizeof index, "%s/model.safetensors.index.json", dir);
    vkt_path(path, sizeof path, "%s/model.safetensors", dir);
    int *found = vkt_calloc((size_t)m->n_params, sizeof *found, "tensor matches");
    int rc = 0, multimodal = 0;
    char cfg_path[4096], cfg_err[256];
    struct hf_config h;
    vkt_path(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    if (access(cfg_path, F_OK) == 0 && !hf_config_read(cfg_path, &h, cfg_err, sizeof cfg_err))
        multimodal = h.multimodal;
    struct bnb_loader *bnb = m->c.base_bnb4 ? bnb_loader_new(m) : NULL;
    if (access(index, F_OK) == 0) {
        char **files;
        int n;
        rc = index_files(index, &files, &n, err, errlen);
        for (int i = 0; i < n; i++) {
            vkt_path(path, sizeof path, "%s/%s", dir, files[i]);
            if (!rc)
                rc = load_file(m, path, multimodal, bnb, found, err, errlen);
            free(files[i]);
        }
        free(files);
    } else {
        rc = load_file(m, path, multimodal, bnb, found, err, errlen);
    }
    char ignored[8];
    if (bnb && bnb_finish(bnb, rc ? ignored : err, rc ? sizeof ignored : errlen))
        rc = -1;
    for (int i = 0; i < m->n_params && !rc; i++)
        if (!found[i] && !m->params[i].adapter) {
            snprintf(err, errlen, "%s: tensor '%s' is missing", access(index, F_OK) ? path : index, m->params[i].hf);
            rc = -1;
        }
    free(found);
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
    c->qkv_bias = h.qkv_bias, c->o_bias = h.o_bias, c->mlp_bias = h.mlp_bias;
    c->head_dim = (uint32_t)h.head_dim, c->qk_norm = h.qk_norm, c->sliding_window = (uint32_t)h.sliding_window;
    c->full_layers = h.full_layers, c->nope_layers = h.nope_layers;
    c->fused_proj = h.fused_proj, c->rotary_dim = (uint32_t)h.rotary_dim;
    c->norm_offset = h.norm_offset, c->post_norms = h.post_norms, c->mlp_gelu = h.mlp_gelu;
    c->embed_scale = (float)h.embed_scale, c->attn_scalar = (float)h.attn_scalar;
    c->rope_local_theta = h.rope_local_theta;
    c->attn_softcap = (float)h.attn_softcap, c->final_softcap = (float)h.final_softcap;
    c->rope_scaling = (struct op_rope_scaling){.type = (enum op_rope_type)h.rope_scaling,
                                               .factor = h.rope_factor,
                                               .low_freq_factor = h.rope_low_freq_factor,
                                               .high_freq_factor = h.rope_high_freq_factor,
                                               .original_max = (uint32_t)h.rope_original_max,
                                               .attention = h.rope_attention};
    memcpy(c->rope_scaling.short_factor, h.rope_short, sizeof h.rope_short);
    memcpy(c->rope_scaling.long_factor, h.rope_long, sizeof h.rope_long);
    c->base_bnb4 = h.bnb4, c->base_nf4 = h.bnb4 != 0, c->base_nf4_double = h.bnb4_double;
    c->init_std = 0.02f;
    char why[512];
    if (model_config_check(c, 0, why, sizeof why))
        return vkt_error(err, errlen, "%s: %s", path, why);
    return 0;
}
