/* data_sft: the `sft_jsonl` dataset reader. One JSON object per line:
 *   {"prompt": str, "response": str}
 *       -> BOS + prompt + response + EOS
 *   {"messages": [{"role": "system"|"user"|"assistant", "content": str}...]}
 *       -> the ids of the conversation as the chat template writes it
 *          (include/vktrain/chat_template.h; plain: BOS + for each turn
 *          "<role>: <content>\n" + EOS)
 * and a flag per token saying whether it may be a label: prompt text,
 * system and user turns and the template's headers are not (unless
 * train_on_input); response text, what the assistant says with the
 * end-of-turn the template writes after it, and the EOS after a final
 * assistant turn (plain) are. A conversation is encoded whole, as the model
 * sees it at inference; a token that holds both template text and the
 * assistant's first characters is trained. Blank lines are skipped; a
 * malformed line is an error with file:line, or skipped and counted with
 * dataset.skip_bad_lines. Never builds sequences. */
#include "data_internal.h"

#include "vktrain/chat_template.h"
#include "vktrain/util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What reading conversations needs across lines: the chat format (opened
 * at the first conversation), the rendered text, and scratch. */
struct sft_reader {
    struct chat_format chat;
    bool chat_open;
    struct chat_text text;
    struct chat_message *msgs;
    size_t cap_msgs;
    vkt_token *prefix;
    size_t cap_prefix;
};

static void push(struct data *d, const char *text, size_t n, bool trainable)
{
    int64_t k = data_store_encode(d, text, n);
    memset(d->trainable + d->n_tok - k, trainable, (size_t)k);
}

static void push_special(struct data *d, int id, bool trainable)
{
    data_store_push(d, id);
    d->trainable[d->n_tok - 1] = trainable;
}

static const char *str(json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

/* Checks one parsed line; NULL if it is a sample, else what is wrong. */
static const char *check_sample(json_t *obj)
{
    if (!json_is_object(obj))
        return "expected a JSON object";
    json_t *msgs = json_object_get(obj, "messages");
    if (!msgs) {
        if (!json_is_string(json_object_get(obj, "prompt")) || !json_is_string(json_object_get(obj, "response")))
            return "expected {\"prompt\": str, \"response\": str} or {\"messages\": [...]}";
        return NULL;
    }
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return "\"messages\" must be a non-empty list";
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        const char *role = str(m, "role");
        if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant")))
            return "each message needs \"role\": \"system\", \"user\" or \"assistant\"";
        if (!str(m, "content"))
            return "each message needs \"content\": str";
    }
    return NULL;
}

/* The count of the sample's first ids (ids[0, k), text[0, len)) that the
 * text before byte `at` makes: how far they agree with the ids of
 * text[0, at) alone. A token spanning `at` counts as after it; with
 * `start`, also one that swallows the white space at `at` (an added token
 * with rstrip, as Phi-3's <|assistant|>): the text through the next
 * character then makes the same ids as the text before it. */
static int64_t ids_before(struct data *d, struct sft_reader *r, const vkt_token *ids, int64_t k, size_t at, bool start)
{
    if (at == 0)
        return 0;
    if (at == r->text.len)
        return k;
    size_t m = tokenizer_encode_all(&d->tok, r->text.text, at, &r->prefix, &r->cap_prefix);
    int64_t i = 0;
    while (i < k && (size_t)i < m && ids[i] == r->prefix[i])
        i++;
    if (start && i == (int64_t)m && i > 0) {
        vkt_token last = r->prefix[m - 1];
        size_t next = at + 1;
        while (next < r->text.len && ((unsigned char)r->text.text[next] & 0xc0) == 0x80)
            next++;
        size_t m2 = tokenizer_encode_all(&d->tok, r->text.text, next, &r->prefix, &r->cap_prefix);
        if (m2 == m && r->prefix[m - 1] == last)
            i--;
    }
    return i;
}

/* The messages of obj rendered into r->text; NULL, or what is wrong with
 * the conversation for the template. */
static const char *render(struct sft_reader *r, json_t *msgs)
{
    size_t n = json_array_size(msgs), i;
    if (n > r->cap_msgs) {
        r->cap_msgs = 2 * n;
        r->msgs = vkt_realloc(r->msgs, r->cap_msgs * sizeof *r->msgs, "chat messages");
    }
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        json_t *content = json_object_get(m, "content");
        r->msgs[i] = (struct chat_message){str(m, "role"), json_string_value(content), json_string_length(content)};
    }
    return chat_render(&r->chat, r->msgs, n, false, &r->text);
}

/* Appends the conversation in r->text: its ids, trainable inside the
 * assistant's spans (everywhere with train_on_input). */
static void push_chat(struct data *d, struct sft_reader *r, bool last_assistant)
{
    bool on_input = d->cfg->dataset.train_on_input, plain = r->chat.kind == CHAT_PLAIN;
    if (plain)
        push_special(d, d->tok.bos, false);
    int64_t start = d->n_tok, k = data_store_encode(d, r->text.text, r->text.len);
    memset(d->trainable + start, on_input, (size_t)k);
    for (size_t s = 0; s < r->text.n_spans && !on_input; s++) {
        int64_t a = ids_before(d, r, d->tok_ids + start, k, r->text.start[s], true);
        int64_t b = ids_before(d, r, d->tok_ids + start, k, r->text.end[s], false);
        if (b > a)
            memset(d->trainable + start + a, 1, (size_t)(b - a));
    }
    if (plain)
        push_special(d, d->tok.eos, last_assistant || on_input);
}

static void push_sample(struct data *d, json_t *obj)
{
    bool on_input = d->cfg->dataset.train_on_input;
    json_t *p = json_object_get(obj, "prompt"), *r = json_object_get(obj, "response");
    push_special(d, d->tok.bos, false);
    push(d, json_string_value(p), json_string_length(p), on_input);
    push(d, json_string_value(r), json_string_length(r), true);
    push_special(d, d->tok.eos, true);
}

static int sft_file(struct data *d, struct data_docs *docs, void *ctx, const char *file, const char *buf, size_t n,
                    char *err, size_t errlen)
{
    struct sft_reader *r = ctx;
    int rc = 0;
    long line_no = 0;
    for (size_t line = 0; rc == 0 && line < n;) {
        const char *nl = memchr(buf + line, '\n', n - line);
        size_t end = nl ? (size_t)(nl - buf) : n;
        line_no++;
        if (strspn(buf + line, " \t\r") < end - line) {
            json_error_t jerr;
            json_t *obj = json_loadb(buf + line, end - line, 0, &jerr);
            const char *bad = obj ? check_sample(obj) : jerr.text;
            json_t *msgs = bad ? NULL : json_object_get(obj, "messages");
            if (msgs && !r->chat_open) {
                if (chat_format_open(&r->chat, &d->cfg->tokenizer, &d->tok, err, errlen)) {
                    json_decref(obj);
                    return -1;
                }
                r->chat_open = true;
                d->chat_template = chat_format_name(&r->chat);
                d->chat_template_from_file = r->chat.from_file;
            }
            if (msgs)
                bad = render(r, msgs);
            if (!bad) {
                int64_t start = d->n_tok;
                if (msgs) {
                    json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
                    push_chat(d, r, !strcmp(str(last, "role"), "assistant"));
                } else {
                    push_sample(d, obj);
                }
                data_docs_push(docs, start, d->n_tok - start);
                d->stats.n_docs++;
            } else if (d->cfg->dataset.skip_bad_lines) {
                d->stats.n_bad_lines++;
            } else {
                snprintf(err, errlen, "%s:%ld: %s%s", file, line_no, obj ? "" : "invalid JSON: ", bad);
                rc = -1;
            }
            json_decref(obj);
        }
        line = end + 1;
    }
    return rc;
}

int data_read_sft(struct data *d, const char *path, struct data_docs *docs, char *err, size_t errlen)
{
    struct sft_reader r = {0};
    int rc = data_each_file(d, path, docs, sft_file, &r, err, errlen);
    if (r.chat_open)
        chat_format_close(&r.chat);
    chat_text_free(&r.text);
    free(r.msgs);
    free(r.prefix);
    return rc;
}
