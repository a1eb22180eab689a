/* chat_driver: runs vktrain's chat templates for tests/test_chat_template.py.
 *   chat_driver render TOKENIZER TEMPLATE GEN FILE
 *       TOKENIZER: a tokenizer.json or a folder holding one ("byte": the
 *       byte tokenizer); TEMPLATE: auto, llama3, chatml, llama2, plain, gemma,
 *       qwen3 or phi3;
 *       GEN: 1 to end with the assistant's header. FILE holds one JSON list
 *       of {role, content} messages per line; prints per line
 *       {"text": ..., "spans": [[start, end], ...]} (byte offsets) or
 *       {"error": ...}
 *   chat_driver data RECIPE [KEY=VALUE...]
 *       opens the recipe's dataset and prints the token store: "ids ..."
 *       then "trainable ..." (0/1 per token), then "template NAME"
 * Exit status 1 with the message on stderr when the template or the
 * dataset fails to open. */
#include "vktrain/chat_template.h"
#include "vktrain/data.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int render(char **argv)
{
    bool byte = !strcmp(argv[0], "byte");
    struct config_tokenizer cfg = {.type = byte ? TOKENIZER_BYTE : TOKENIZER_HF, .path = byte ? NULL : argv[0]};
    if (chat_template_parse(argv[1], &cfg.chat_template)) {
        fprintf(stderr, "chat_driver: no template %s\n", argv[1]);
        return 2;
    }
    char err[4096];
    struct tokenizer tok;
    struct chat_format f;
    if (tokenizer_open(&tok, &cfg, err, sizeof err) || chat_format_open(&f, &cfg, &tok, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    FILE *in = fopen(argv[3], "rb");
    if (!in) {
        perror(argv[3]);
        return 2;
    }
    char *line = NULL;
    size_t cap = 0;
    struct chat_text text = {0};
    while (getline(&line, &cap, in) > 0) {
        json_error_t je;
        json_t *msgs = json_loads(line, 0, &je);
        size_t n = json_array_size(msgs), i;
        struct chat_message *m = calloc(n + 1, sizeof *m);
        json_t *v;
        json_array_foreach(msgs, i, v)
        {
            json_t *c = json_object_get(v, "content");
            m[i] = (struct chat_message){json_string_value(json_object_get(v, "role")), json_string_value(c),
                                         json_string_length(c)};
        }
        const char *bad = chat_render(&f, m, n, atoi(argv[2]) != 0, &text);
        json_t *out = json_object();
        if (bad) {
            json_object_set_new(out, "error", json_string(bad));
        } else {
            json_t *spans = json_array();
            for (size_t s = 0; s < text.n_spans; s++)
                json_array_append_new(spans, json_pack("[I, I]", (json_int_t)text.start[s], (json_int_t)text.end[s]));
            json_object_set_new(out, "text", json_stringn(text.text, text.len));
            json_object_set_new(out, "spans", spans);
        }
        char *s = json_dumps(out, JSON_COMPACT);
        printf("%s\n", s);
        free(s);
        json_decref(out);
        json_decref(msgs);
        free(m);
    }
    free(line);
    fclose(in);
    chat_text_free(&text);
    chat_format_close(&f);
    tokenizer_close(&tok);
    return 0;
}

static int data(int argc, char **argv)
{
    struct config cfg;
    struct data d;
    char err[4096];
    if (config_load(&cfg, argv[0], argc - 1, argv + 1, err, sizeof err) || data_open(&d, &cfg, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("ids");
    for (int64_t i = 0; i < d.n_tok; i++)
        printf(" %u", (unsigned)d.tok_ids[i]);
    printf("\ntrainable");
    for (int64_t i = 0; i < d.n_tok; i++)
        printf(" %d", d.trainable ? d.trainable[i] : 1);
    printf("\ntemplate %s\n", d.chat_template ? d.chat_template : "none");
    data_close(&d);
    config_free(&cfg);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && !strcmp(argv[1], "render"))
        return render(argv + 2);
    if (argc >= 3 && !strcmp(argv[1], "data"))
        return data(argc - 2, argv + 2);
    fprintf(stderr, "usage: chat_driver render TOKENIZER TEMPLATE GEN FILE | data RECIPE [KEY=VALUE...]\n");
    return 2;
}
