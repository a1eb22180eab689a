/* chat_template: the chat formats of include/vktrain/chat_template.h
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

static const char *const kind_names[] = {
    [CHAT_AUTO] = "auto",   [CHAT_LLAMA3] = "llama3", [CHAT_CHATML] = "chatml", [CHAT_LLAMA2] = "llama2",
    [CHAT_PLAIN] = "plain", [CHAT_GEMMA] = "gemma",   [CHAT_QWEN3] = "qwen3",   [CHAT_PHI3] = "phi3"};

const char *chat_format_name(const struct chat_format *f)
{
    return kind_names[f->kind];
}

int chat_template_parse(const char *name, enum chat_template *kind)
{
    for (size_t k = 0; k < sizeof kind_names / sizeof *kind_names; k++)
        if (!strcmp(name, kind_names[k])) {
            *kind = (enum chat_template)k;
            return 0;
        }
    return -1;
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

/* ---- the families ---- */

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

/* Gemma: BOS, then '<start_of_turn>' + role ('model' for the assistant) +
 * '\n' + content|trim + '<end_of_turn>\n'. Gemma 3 writes a system message
 * (untrimmed) + '\n\n' at the start of the first turn; Gemma 1 and 2 have no
 * system role. Roles alternate user, assistant, ... */
static const char *render_gemma(const struct chat_format *f, const struct chat_message *m, size_t n, bool gen,
                                struct chat_text *out)
{
    size_t first = n && is(&m[0], "system") ? 1 : 0;
    if (first && !f->system_prefix)
        return "the Gemma 1 and 2 chat template has no system role (it raises 'System role not supported'); "
               "put the instructions in the first user message";
    put_str(out, f->bos);
    for (size_t i = first; i < n; i++) {
        bool user = is(&m[i], "user");
        if (user != ((i - first) % 2 == 0) || is(&m[i], "system"))
            return "the gemma chat template needs the roles to alternate user, assistant, user, ... after one "
                   "optional system message";
        put_str(out, user ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
        if (i == first && first) {
            put(out, m[0].content, m[0].len);
            put_str(out, "\n\n");
        }
        size_t start = out->len;
        put_stripped(out, m[i].content, m[i].len);
        put_str(out, "<end_of_turn>");
        if (!user)
            put_span(out, start);
        put_str(out, "\n");
    }
    if (gen)
        put_str(out, "<start_of_turn>model\n");
    return NULL;
}

static bool starts_with(const char *s, size_t n, const char *p)
{
    size_t k = strlen(p);
    return n >= k && !memcmp(s, p, k);
}

static bool ends_with(const char *s, size_t n, const char *p)
{
    size_t k = strlen(p);
    return n >= k && !memcmp(s + n - k, p, k);
}

/* s[*a, *b) without the newlines at its start (lead) and its end (trail). */
static void strip_newlines(const char *s, size_t *a, size_t *b, bool lead, bool trail)
{
    while (lead && *a < *b && s[*a] == '\n')
        ++*a;
    while (trail && *b > *a && s[*b - 1] == '\n')
        --*b;
}

/* The first (last) occurrence of p in s[0, n): its offset, or n. */
static size_t find(const char *s, size_t n, const char *p, bool last)
{
    size_t k = strlen(p), at = n;
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, p, k)) {
            at = i;
            if (!last)
                break;
        }
    return at;
}

/* Qwen3 (its published template, non-thinking turns as it writes them):
 * ChatML turns; an assistant content holding '</think>' is cut into its
 * reasoning (before the first '</think>', after the last '<think>' there)
 * and the answer (after the last '</think>'). The assistant turns after the
 * last user query are written '<think>\n' + reasoning + '\n</think>\n\n' +
 * answer when they are the last message or have reasoning; every other
 * assistant turn is the answer alone. A user message wrapped in
 * <tool_response>...</tool_response> is not a query. */
static void render_qwen3(const struct chat_message *m, size_t n, bool gen, struct chat_text *out)
{
    size_t last_query = n ? n - 1 : 0;
    for (size_t i = n; i-- > 0;)
        if (is(&m[i], "user") && !(starts_with(m[i].content, m[i].len, "<tool_response>") &&
                                   ends_with(m[i].content, m[i].len, "</tool_response>"))) {
            last_query = i;
            break;
        }
    for (size_t i = 0; i < n; i++) {
        const char *c = m[i].content;
        if (!is(&m[i], "assistant")) {
            put_str(out, "<|im_start|>");
            put_str(out, m[i].role);
            put_str(out, "\n");
            put(out, c, m[i].len);
            put_str(out, "<|im_end|>\n");
            continue;
        }
        size_t ra = 0, rb = 0, ca = 0, cb = m[i].len;
        size_t close = find(c, m[i].len, "</think>", false);
        if (close < m[i].len) {
            rb = close;
            strip_newlines(c, &ra, &rb, false, true);
            size_t open = find(c + ra, rb - ra, "<think>", true);
            if (open < rb - ra)
                ra += open + strlen("<think>");
            strip_newlines(c, &ra, &rb, true, false);
            ca = find(c, m[i].len, "</think>", true) + strlen("</think>");
            strip_newlines(c, &ca, &cb, true, false);
        }
        put_str(out, "<|im_start|>assistant\n");
        size_t start = out->len;
        if (i > last_query && (i + 1 == n || rb > ra)) {
            strip_newlines(c, &ra, &rb, true, true);
            put_str(out, "<think>\n");
            put(out, c + ra, rb - ra);
            put_str(out, "\n</think>\n\n");
            strip_newlines(c, &ca, &cb, true, false);
        }
        put(out, c + ca, cb - ca);
        put_str(out, "<|im_end|>");
        put_span(out, start);
        put_str(out, "\n");
    }
    if (gen)
        put_str(out, "<|im_start|>assistant\n");
}

/* Phi-3 and 3.5: '<|' + role + '|>\n' + content + '<|end|>\n' (Phi-4-mini:
 * without the '\n' after the role), then EOS when the text does not end
 * with the assistant's header. Phi-3.5 leaves out an empty system message. */
static void render_phi3(const struct chat_format *f, const struct chat_message *m, size_t n, bool gen,
                        struct chat_text *out)
{
    for (size_t i = 0; i < n; i++) {
        if (is(&m[i], "system") && !m[i].len && f->skip_empty_system)
            continue;
        put_str(out, "<|");
        put_str(out, m[i].role);
        put_str(out, f->role_newline ? "|>\n" : "|>");
        size_t start = out->len;
        put(out, m[i].content, m[i].len);
        put_str(out, "<|end|>");
        if (is(&m[i], "assistant"))
            put_span(out, start);
        if (f->role_newline)
            put_str(out, "\n");
    }
    put_str(out, gen ? (f->role_newline ? "<|assistant|>\n" : "<|assistant|>") : f->eos);
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
    case CHAT_GEMMA:
        return render_gemma(f, m, n, generation_prompt, out);
    case CHAT_QWEN3:
        render_qwen3(m, n, generation_prompt, out);
        return NULL;
    case CHAT_PHI3:
        render_phi3(f, m, n, generation_prompt, out);
        return NULL;
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
                                 "tokenizer.chat_template: llama3, chatml, llama2, gemma, qwen3, phi3 or plain",
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

/* Qwen3's template: ChatML with the thinking block written as its published
 * template does (the generation prompt without '<think>', which a
 * template of a thinking-only model writes, is told by the enable_thinking
 * switch). */
static bool qwen3_template(const char *t)
{
    return strstr(t, "ns.last_query_index") && strstr(t, "enable_thinking is defined and enable_thinking is false") &&
           strstr(t, "'\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n')");
}

/* Gemma's two forms: 3 (a system message opens the first user turn), 2
 * (Gemma 1 and 2: no system role); 0: neither. */
static int gemma_form(const char *t)
{
    if (strstr(t, "set first_user_prefix = messages[0]['content'] + '\\n\\n'"))
        return 3;
    return strstr(t, "raise_exception('System role not supported')") ? 2 : 0;
}

/* Phi's two forms: 3 (Phi-3, 3.5: '<|user|>\n' + content + '<|end|>\n'), 4
 * (Phi-4-mini: '<|' + role + '|>' + content + '<|end|>'), both with EOS
 * after the last turn when there is no generation prompt; 0: neither. */
static int phi3_form(const char *t)
{
    if (!strstr(t, "{{ eos_token }}"))
        return 0;
    if (strstr(t, "'<|user|>\\n' + message['content'] + '<|end|>\\n'"))
        return 3;
    return strstr(t, "'<|' + message['role'] + '|>' + message['content'] + '<|end|>'") ? 4 : 0;
}

static enum chat_template detect(const char *t)
{
    if (strstr(t, "<|start_header_id|>") && strstr(t, "<|end_header_id|>") && strstr(t, "<|eot_id|>"))
        return CHAT_LLAMA3;
    if (strstr(t, "<start_of_turn>") && strstr(t, "<end_of_turn>"))
        return gemma_form(t) ? CHAT_GEMMA : CHAT_AUTO;
    if (strstr(t, "<|im_start|>") && strstr(t, "<|im_end|>") && strstr(t, "<think>"))
        return qwen3_template(t) ? CHAT_QWEN3 : CHAT_AUTO;
    if (strstr(t, "<|im_start|>") && strstr(t, "<|im_end|>"))
        return CHAT_CHATML;
    if (strstr(t, "<|end|>") && (strstr(t, "<|user|>") || strstr(t, "'<|' + message['role'] + '|>'")))
        return phi3_form(t) ? CHAT_PHI3 : CHAT_AUTO;
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
                             "SmolLM2, Llama 2, Gemma, Qwen3, Phi-3 and Phi-4-mini); set tokenizer.chat_template: "
                             "llama3, chatml, llama2, gemma, qwen3, phi3 or plain to say how to write the messages",
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
    f->system_prefix = !f->from_file || f->kind != CHAT_GEMMA || gemma_form(tmpl) == 3;
    f->role_newline = !f->from_file || f->kind != CHAT_PHI3 || phi3_form(tmpl) == 3;
    f->skip_empty_system =
        f->from_file && f->kind == CHAT_PHI3 && strstr(tmpl, "message['role'] == 'system' and message['content']");
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
    case CHAT_GEMMA:
        rc = rc || one_token(f, t, f->bos, &id, source, err, errlen) ||
             one_token(f, t, "<start_of_turn>", &id, source, err, errlen) ||
             one_token(f, t, "<end_of_turn>", &f->end_of_turn, source, err, errlen);
        break;
    case CHAT_QWEN3:
        rc = rc || one_token(f, t, "<|im_start|>", &id, source, err, errlen) ||
             one_token(f, t, "<|im_end|>", &f->end_of_turn, source, err, errlen);
        break;
    case CHAT_PHI3:
        rc = rc || one_token(f, t, "<|system|>", &id, source, err, errlen) ||
             one_token(f, t, "<|user|>", &id, source, err, errlen) ||
             one_token(f, t, "<|assistant|>", &id, source, err, errlen) ||
             one_token(f, t, f->eos, &id, source, err, errlen) ||
             one_token(f, t, "<|end|>", &f->end_of_turn, source, err, errlen);
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
