/* chat_template: the four chat formats of include/vktrain/chat_template.h
 * written out in C, and the recognition of a family in a Jinja template's
 * text (by substrings that only that family's templates hold). Never
 * interprets Jinja and never encodes beyond checking the template's special
 * strings. */
#include "vktrain/chat_template.h"

#include "tokenizer_hf.h"
#include "vktrain/util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const kind_names[] = {[CHAT_AUTO] = "auto",     [CHAT_LLAMA3] = "llama3", [CHAT_CHATML] = "chatml",
                                         [CHAT_LLAMA2] = "llama2", [CHAT_PLAIN] = "plain"};

const char *chat_format_name(const struct chat_format *f)
{
    return kind_names[f->kind];
}

/* ---- building the text ---- */

static void put(struct chat_text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = 2 * (t->len + n + 1) + 256;
        t->text = vkt_realloc(t->text, t->cap, "chat text");
    }
    memcpy(t->text + t->len, s, n);
    t->len += n;
    t->text[t->len] = 0;
}

static void put_str(struct chat_text *t, const char *s)
{
    put(t, s, strlen(s));
}

/* The assistant's output: from start to the end of the text so far. */
static void put_span(struct chat_text *t, size_t start)
{
    if (t->n_spans == t->cap_spans) {
        t->cap_spans = t->cap_spans ? 2 * t->cap_spans : 8;
        t->start = vkt_realloc(t->start, t->cap_spans * sizeof *t->start, "chat spans");
        t->end = vkt_realloc(t->end, t->cap_spans * sizeof *t->end, "chat spans");
    }
    t->start[t->n_spans] = start;
    t->end[t->n_spans++] = t->len;
}

void chat_text_free(struct chat_text *t)
{
    free(t->text);
    free(t->start);
    free(t->end);
    memset(t, 0, sizeof *t);
}

/* Python's str.isspace, which Jinja's trim and str.strip() use. */
static bool py_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* s[*a, *b): s[0, n) without the white space at either end. */
static void strip(const char *s, size_t n, size_t *a, size_t *b)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, j = n, len;
    while (i < n && py_space(hf_utf8_next(u + i, n - i, &len)))
        i += len;
    while (j > i) {
        size_t k = j - 1;
        while (k > i && (u[k] & 0xc0) == 0x80)
            k--;
        if (!py_space(hf_utf8_next(u + k, j - k, &len)) || k + len != j)
            break;
        j = k;
    }
    *a = i;
    *b = j;
}

static void put_stripped(struct chat_text *t, const char *s, size_t n)
{
    size_t a, b;
    strip(s, n, &a, &b);
    put(t, s + a, b - a);
}

static bool is(const struct chat_message *m, const char *role)
{
    return !strcmp(m->role, role);
}

/* ---- the four families ---- */

/* Llama 3: '<|start_header_id|>' + role + '<|end_header_id|>\n\n' +
 * content|trim + '<|eot_id|>', after BOS; Llama 3.1 / 3.2 first write a
 * system turn with their dates and the system message (trimmed). */
static void render_llama3(const struct chat_format *f, const struct chat_message *m, size_t n, bool gen,
                          struct chat_text *out)
{
    put_str(out, f->bos);
    size_t i = 0;
    if (f->date) {
        put_str(out, "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: ");
        put_str(out, f->knowledge);
        put_str(out, "\nToday Date: ");
        put_str(out, f->date);
        put_str(out, "\n\n");
        if (n && is(&m[0], "system")) {
            put_stripped(out, m[0].content, m[0].len);
            i = 1;
        }
        put_str(out, "<|eot_id|>");
    }
    for (; i < n; i++) {
        put_str(out, "<|start_header_id|>");
        put_str(out, m[i].role);
        put_str(out, "<|end_header_id|>\n\n");
        size_t start = out->len;
        put_stripped(out, m[i].content, m[i].len);
        put_str(out, "<|eot_id|>");
        if (is(&m[i], "assistant"))
            put_span(out, start);
    }
    if (gen)
        put_str(out, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* ChatML: '<|im_start|>' + role + '\n' + content + '<|im_end|>' + '\n'. */
static void render_chatml(const struct chat_format *f, const struct chat_message *m, size_t n, bool gen,
                          struct chat_text *out)
{
    if (f->default_system && !is(&m[0], "system")) {
        put_str(out, "<|im_start|>system\n");
        put_str(out, f->default_system);
        put_str(out, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        put_str(out, "<|im_start|>");
        put_str(out, m[i].role);
        put_str(out, "\n");
        size_t start = out->len;
        put(out, m[i].content, m[i].len);
        put_str(out, "<|im_end|>");
        if (is(&m[i], "assistant"))
            put_span(out, start);
        put_str(out, "\n");
    }
    if (gen)
        put_str(out, "<|im_start|>assistant\n");
}

/* Llama 2 chat: a user turn is BOS + '[INST] ' + content.strip() + ' [/INST]',
 * the first one's content prefixed with '<<SYS>>\n' + system +
 * '\n<</SYS>>\n\n'; an assistant turn is ' ' + content.strip() + ' ' + EOS.
 * The template has no generation prompt: the text ends with [/INST]. */
static const char *render_llama2(const struct chat_format *f, const struct chat_message *m, size_t n,
                                 struct chat_text *out)
{
    size_t first = n && is(&m[0], "system") ? 1 : 0;
    if (first == n)
        return "the llama2 chat template needs a user message";
    struct chat_text content = {0};
    for (size_t i = first; i < n; i++) {
        bool user = is(&m[i], "user");
        if (user != ((i - first) % 2 == 0) || is(&m[i], "system")) {
            chat_text_free(&content);
            return "the llama2 chat template needs the roles to alternate user, assistant, user, ... after one "
                   "optional system message";
        }
        content.len = 0;
        if (i == first && first) {
            put_str(&content, "<<SYS>>\n");
            put(&content, m[0].content, m[0].len);
            put_str(&content, "\n<</SYS>>\n\n");
        }
        put(&content, m[i].content, m[i].len);
        if (user) {
            put_str(out, f->bos);
            put_str(out, "[INST] ");
            put_stripped(out, content.text, content.len);
            put_str(out, " [/INST]");
        } else {
            put_str(out, " ");
            size_t start = out->len;
            put_stripped(out, content.text, content.len);
            put_str(out, " ");
            put_str(out, f->eos);
            put_span(out, start);
        }
    }
    chat_text_free(&content);
    return NULL;
}

/* vktrain's own: role + ': ' + content + '\n' (BOS and EOS are the
 * caller's, as ids). */
static void render_plain(const struct chat_message *m, size_t n, bool gen, struct chat_text *out)
{
    for (size_t i = 0; i < n; i++) {
        put_str(out, m[i].role);
        put_str(out, ": ");
        size_t start = out->len;
        put(out, m[i].content, m[i].len);
        put_str(out, "\n");
        if (is(&m[i], "assistant"))
            put_span(out, start);
    }
    if (gen)
        put_str(out, "assistant: ");
}

const char *chat_render(const struct chat_format *f, const struct chat_message *m, size_t n, bool generation_prompt,
                        struct chat_text *out)
{
    out->len = 0;
    out->n_spans = 0;
    put(out, "", 0);
    switch (f->kind) {
    case CHAT_LLAMA3:
        render_llama3(f, m, n, generation_prompt, out);
        return NULL;
    case CHAT_CHATML:
        render_chatml(f, m, n, generation_prompt, out);
        return NULL;
    case CHAT_LLAMA2:
        return render_llama2(f, m, n, out);
    case CHAT_AUTO:
    case CHAT_PLAIN:
        break;
    }
    render_plain(m, n, generation_prompt, out);
    return NULL;
}

/* ---- recognizing a template ---- */

/* The chat template beside the tokenizer: tokenizer_config.json's
 * chat_template (a string, or the "default" of a list of {name, template}),
 * else chat_template.jinja. *tmpl is NULL when there is none; *where names
 * the file. */
static int read_template(const char *path, char **tmpl, char *where, size_t where_cap, char *err, size_t errlen)
{
    *tmpl = NULL;
    struct stat st;
    tokenizer_file_beside(path, "tokenizer_config.json", where, where_cap);
    if (!stat(where, &st)) {
        json_error_t je;
        json_t *cfg = json_load_file(where, 0, &je), *t = json_object_get(cfg, "chat_template");
        if (!cfg)
            return vkt_error(err, errlen, "%s: line %d: %s", where, je.line, je.text);
        if (json_is_array(t)) {
            size_t i;
            json_t *v, *found = NULL;
            json_array_foreach(t, i, v)
            {
                const char *name = json_string_value(json_object_get(v, "name"));
                if (name && !strcmp(name, "default"))
                    found = json_object_get(v, "template");
            }
            t = found;
            if (!json_is_string(t)) {
                json_decref(cfg);
                return vkt_error(err, errlen,
                                 "%s: chat_template is a list without a \"default\" template; set "
                                 "tokenizer.chat_template: llama3, chatml, llama2 or plain",
                                 where);
            }
        }
        if (json_is_string(t))
            *tmpl = vkt_strdup(json_string_value(t));
        else if (t && !json_is_null(t)) {
            json_decref(cfg);
            return vkt_error(err, errlen, "%s: chat_template is neither a string nor a list of templates", where);
        }
        json_decref(cfg);
        if (*tmpl)
            return 0;
    }
    char jinja[4096];
    tokenizer_file_beside(path, "chat_template.jinja", jinja, sizeof jinja);
    FILE *fp = fopen(jinja, "rb");
    if (!fp)
        return 0;
    snprintf(where, where_cap, "%s", jinja);
    size_t cap = 1 << 14, n = 0, r;
    char *buf = vkt_malloc(cap, "chat template");
    while ((r = fread(buf + n, 1, cap - 1 - n, fp)) > 0)
        if ((n += r) == cap - 1)
            buf = vkt_realloc(buf, cap *= 2, "chat template");
    fclose(fp);
    buf[n] = 0;
    *tmpl = buf;
    return 0;
}

static enum chat_template detect(const char *t)
{
    if (strstr(t, "<|start_header_id|>") && strstr(t, "<|end_header_id|>") && strstr(t, "<|eot_id|>"))
        return CHAT_LLAMA3;
    if (strstr(t, "<|im_start|>") && strstr(t, "<|im_end|>"))
        return CHAT_CHATML;
    if (strstr(t, "[INST]") && strstr(t, "<<SYS>>"))
        return CHAT_LLAMA2;
    return CHAT_AUTO;
}

/* The text of the Jinja string literal that goes on at s, up to the first
 * unescaped quote or the string `stop`, escapes (\n, \t, \', \", \\)
 * resolved; NULL when a quote comes first (the literal ends before `stop`:
 * the text is an expression's, not a constant) or neither comes. */
static char *literal_until(const char *s, const char *stop)
{
    struct chat_text out = {0};
    size_t stop_len = strlen(stop);
    put(&out, "", 0);
    for (; *s; s++) {
        if (stop_len && !strncmp(s, stop, stop_len))
            return out.text;
        if (*s == '\'' || *s == '"')
            break;
        char c = *s;
        if (c == '\\' && s[1]) {
            c = *++s;
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
        }
        put(&out, &c, 1);
    }
    if (!stop_len && (*s == '\'' || *s == '"'))
        return out.text;
    chat_text_free(&out);
    return NULL;
}

/* ChatML: the system turn a template writes when the first message is not
 * one, a constant '<|im_start|>system\n...<|im_end|>' in its text. */
static char *chatml_default_system(const char *t)
{
    static const char head[] = "<|im_start|>system\\n";
    for (const char *p = strstr(t, head); p; p = strstr(p + 1, head)) {
        char *s = literal_until(p + sizeof head - 1, "<|im_end|>");
        if (s)
            return s;
    }
    return NULL;
}

/* Llama 3.1 / 3.2: "Cutting Knowledge Date: X\n" and the default of
 * date_string ("26 Jul 2024"; transformers 4.44 has no strftime_now, and a
 * date that changes from day to day has no place in training data). */
static int llama3_dates(struct chat_format *f, const char *t, const char *where, char *err, size_t errlen)
{
    const char *k = strstr(t, "Cutting Knowledge Date: ");
    if (!k)
        return 0;
    f->knowledge = literal_until(k + strlen("Cutting Knowledge Date: "), "\\n");
    static const char *const sets[] = {"set date_string = \"", "set date_string = '"};
    for (int i = 0; i < 2 && !f->date; i++) {
        const char *d = strstr(t, sets[i]);
        if (d)
            f->date = literal_until(d + strlen(sets[i]), "");
    }
    if (!f->knowledge || !f->date)
        return vkt_error(err, errlen,
                         "%s: its Llama 3.1-style chat_template has no constant %s; set tokenizer.chat_template: "
                         "llama3 for the Llama 3 form without dates, or plain",
                         where, f->knowledge ? "date_string default" : "Cutting Knowledge Date");
    return 0;
}

/* The template's special strings must be single tokens of t. */
static int one_token(const struct chat_format *f, const struct tokenizer *t, const char *s, vkt_token *id,
                     const char *source, char *err, size_t errlen)
{
    vkt_token ids[4];
    size_t k = tokenizer_encode(t, s, strlen(s), ids, 4);
    if (k == 1) {
        *id = ids[0];
        return 0;
    }
    return vkt_error(err, errlen, "%s: the %s chat template needs '%s' to be one token, and the tokenizer makes %zu%s",
                     source, chat_format_name(f), s, k,
                     t->hf ? " (it is not an added token of its tokenizer.json)"
                           : " (the byte tokenizer has none; use tokenizer.type: hf with the model's tokenizer)");
}

static char *token_text(const struct tokenizer *t, vkt_token id)
{
    size_t n = tokenizer_decode(t, &id, 1, NULL, 0);
    char *s = vkt_malloc(n + 1, "chat template");
    tokenizer_decode(t, &id, 1, s, n + 1);
    return s;
}

int chat_format_open(struct chat_format *f, const struct config_tokenizer *cfg, const struct tokenizer *t, char *err,
                     size_t errlen)
{
    memset(f, 0, sizeof *f);
    char where[4096] = "tokenizer.chat_template", *tmpl = NULL;
    if (t->hf && read_template(cfg->path, &tmpl, where, sizeof where, err, errlen))
        return -1;
    enum chat_template found = tmpl ? detect(tmpl) : CHAT_AUTO;
    f->kind = cfg->chat_template;
    if (f->kind == CHAT_AUTO) {
        if (tmpl && found == CHAT_AUTO) {
            free(tmpl);
            return vkt_error(err, errlen,
                             "%s: its chat_template is none that vktrain knows (Llama 3, ChatML as in Qwen2 and "
                             "SmolLM2, Llama 2); set tokenizer.chat_template: llama3, chatml, llama2 or plain to "
                             "say how to write the messages",
                             where);
        }
        f->kind = tmpl ? found : CHAT_PLAIN;
        f->from_file = tmpl != NULL;
    } else if (found == f->kind) {
        f->from_file = true;
    }
    int rc = 0;
    if (f->from_file && f->kind == CHAT_LLAMA3)
        rc = llama3_dates(f, tmpl, where, err, errlen);
    if (f->from_file && f->kind == CHAT_CHATML)
        f->default_system = chatml_default_system(tmpl);
    free(tmpl);
    const char *source = f->from_file ? where : "tokenizer.chat_template";
    f->bos = token_text(t, (vkt_token)t->bos);
    f->eos = token_text(t, (vkt_token)t->eos);
    f->end_of_turn = (vkt_token)t->eos;
    vkt_token id;
    switch (f->kind) {
    case CHAT_LLAMA3:
        rc = rc || one_token(f, t, f->bos, &id, source, err, errlen) ||
             one_token(f, t, "<|start_header_id|>", &id, source, err, errlen) ||
             one_token(f, t, "<|end_header_id|>", &id, source, err, errlen) ||
             one_token(f, t, "<|eot_id|>", &f->end_of_turn, source, err, errlen);
        break;
    case CHAT_CHATML:
        rc = rc || one_token(f, t, "<|im_start|>", &id, source, err, errlen) ||
             one_token(f, t, "<|im_end|>", &f->end_of_turn, source, err, errlen);
        break;
    case CHAT_LLAMA2:
        rc = rc || one_token(f, t, f->bos, &id, source, err, errlen) ||
             one_token(f, t, f->eos, &id, source, err, errlen);
        break;
    case CHAT_AUTO:
    case CHAT_PLAIN:
        break;
    }
    if (rc)
        chat_format_close(f);
    return rc ? -1 : 0;
}

void chat_format_close(struct chat_format *f)
{
    free(f->default_system);
    free(f->knowledge);
    free(f->date);
    free(f->bos);
    free(f->eos);
    memset(f, 0, sizeof *f);
}
