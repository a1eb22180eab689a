/* metrics: output_dir/metrics.jsonl (one JSON object per logged step, rank 0
 * only) and the progress line on stdout: redrawn in place on a terminal,
 * one plain line per logged step when piped. A non-finite value is written
 * as null (JSON has no NaN), and a failed write (a full disk) ends the run
 * naming the file. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train_internal.h"
#include "vktrain/util.h"

static int tty;

/* Keeps the lines of steps <= last (those a resumed run does not redo). */
static void truncate_after(const char *path, int64_t last)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char tmp[4096];
    vkt_path(tmp, sizeof tmp, "%s.tmp", path);
    FILE *o = fopen(tmp, "w");
    if (!o)
        vkt_fatal("cannot write %s: %s", tmp, strerror(errno));
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        const char *s = strstr(line, "\"step\":");
        if (s && strtoll(s + 7, NULL, 10) <= last)
            fputs(line, o);
    }
    fclose(f);
    if (fclose(o) || rename(tmp, path))
        vkt_fatal("cannot rewrite %s: %s", path, strerror(errno));
}

void metrics_open(struct trainer *t, int resumed)
{
    char *path = t->metrics_path;
    vkt_path(path, sizeof t->metrics_path, "%s/metrics.jsonl", t->cfg->output_dir);
    if (resumed)
        truncate_after(path, t->step);
    t->metrics = fopen(path, resumed ? "a" : "w");
    if (!t->metrics)
        vkt_fatal("cannot open %s for writing: %s", path, strerror(errno));
    /* mpirun hands ranks a pseudo-terminal even when its output is a file:
     * redraw in place only in a one-process run on a terminal. */
    tty = isatty(STDOUT_FILENO) && t->dist->world == 1;
}

static void eta(char *buf, size_t n, double seconds)
{
    long s = (long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, n, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else
        snprintf(buf, n, "%ldm%02lds", s / 60, s % 60);
}

/* A JSON number, or null for NaN and the infinities. */
static void number(char *buf, size_t n, const char *fmt, double v)
{
    if (isfinite(v))
        snprintf(buf, n, fmt, v);
    else
        snprintf(buf, n, "null");
}

void metrics_log(struct trainer *t, const struct step_metrics *m)
{
    char loss[32], lr[32], norm[32], tps[32], ms[32], val[32];
    number(loss, sizeof loss, "%.9g", m->loss);
    number(lr, sizeof lr, "%.9g", m->lr);
    number(norm, sizeof norm, "%.9g", m->grad_norm);
    number(tps, sizeof tps, "%.6g", m->tokens_per_sec);
    number(ms, sizeof ms, "%.6g", m->step_ms);
    number(val, sizeof val, "%.9g", m->val_loss);
    int bad = fprintf(t->metrics,
                      "{\"step\": %lld, \"loss\": %s, \"lr\": %s, \"grad_norm\": %s, \"tokens\": %.0f, "
                      "\"tokens_per_sec\": %s, \"step_ms\": %s%s%s%s}\n",
                      (long long)m->step, loss, lr, norm, m->tokens, tps, ms, m->has_val ? ", \"val_loss\": " : "",
                      m->has_val ? val : "", m->skipped ? ", \"skipped\": true" : "") < 0;
    if (bad || fflush(t->metrics))
        vkt_fatal("cannot write %s: %s", t->metrics_path, strerror(errno));

    double elapsed = vkt_now() - t->t_start;
    double per_step = elapsed / (double)(m->step - t->first_step);
    char left[32];
    eta(left, sizeof left, per_step * (double)(t->total_steps - m->step));
    char line[512];
    int n = snprintf(line, sizeof line, "step %lld/%lld | loss %.4f | lr %.2e | grad norm %.3f | %.0f tok/s | ETA %s",
                     (long long)m->step, (long long)t->total_steps, m->loss, m->lr, m->grad_norm, m->tokens_per_sec,
                     left);
    if (m->has_val && n > 0 && (size_t)n < sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, " | val loss %.4f", m->val_loss);
    if (tty)
        printf("\r%s\033[K%s", line, m->has_val ? "\n" : "");
    else
        printf("%s\n", line);
    fflush(stdout);
}

void metrics_close(struct trainer *t)
{
    if (tty)
        printf("\n");
    if (t->metrics && fclose(t->metrics))
        vkt_fatal("cannot write %s: %s", t->metrics_path, strerror(errno));
    t->metrics = NULL;
}
