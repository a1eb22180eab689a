/* data_sft: the `sft_jsonl` dataset reader. One JSON object per line:
 *   {"prompt": str, "response": str}
 *       -> BOS + prompt + response + EOS
 *   {"messages": [{"role": "system"|"user"|"assistant", "content": str}...]}
 *       -> BOS + for each turn "<role>: <content>\n" + EOS
 * and a flag per token saying whether it may be a label: prompt text, system
 * and user turns and the "assistant: " headers are not (unless
 * train_on_input); response text, assistant content and a final EOS after an
 * assistant turn are. Blank lines are skipped; a malformed line is an error
 * with file:line, or skipped and counted with dataset.skip_bad_lines.
 * Never builds sequences. */
#include "data_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void push_sample(struct data *d, json_t *obj)
{
    bool on_input = d->cfg->dataset.train_on_input;
    json_t *msgs = json_object_get(obj, "messages");
    push_special(d, d->tok.bos, false);
    if (!msgs) {
        json_t *p = json_object_get(obj, "prompt"), *r = json_object_get(obj, "response");
        push(d, json_string_value(p), json_string_length(p), on_input);
        push(d, json_string_value(r), json_string_length(r), true);
        push_special(d, d->tok.eos, true);
        return;
    }
    size_t i;
    json_t *m;
    bool last_assistant = false;
    json_array_foreach(msgs, i, m)
    {
        const char *role = str(m, "role");
        json_t *content = json_object_get(m, "content");
        last_assistant = !strcmp(role, "assistant");
        push(d, role, strlen(role), on_input);
        push(d, ": ", 2, on_input);
        push(d, json_string_value(content), json_string_length(content), last_assistant || on_input);
        push(d, "\n", 1, last_assistant || on_input);
    }
    push_special(d, d->tok.eos, last_assistant || on_input);
}

static int sft_file(struct data *d, struct data_docs *docs, const char *file, const char *buf, size_t n, char *err,
                    size_t errlen)
{
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
            if (!bad) {
                int64_t start = d->n_tok;
                push_sample(d, obj);
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
    return data_each_file(d, path, docs, sft_file, err, errlen);
}
