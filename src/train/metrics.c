/* metrics: output_dir/metrics.jsonl (one JSON object per logged step, rank 0
 * only) and the progress line on stdout: redrawn in place on a terminal,
 * one plain line per logged step when piped. */
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
        vkt_fatal("cannot write %s", tmp);
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        const char *s = strstr(line, "\"step\":");
        if (s && strtoll(s + 7, NULL, 10) <= last)
            fputs(line, o);
    }
    fclose(f);
    if (fclose(o) || rename(tmp, path))
        vkt_fatal("cannot rewrite %s", path);
}

void metrics_open(struct trainer *t, int resumed)
{
    char path[4096];
    vkt_path(path, sizeof path, "%s/metrics.jsonl", t->cfg->output_dir);
    if (resumed)
        truncate_after(path, t->step);
    t->metrics = fopen(path, resumed ? "a" : "w");
    if (!t->metrics)
        vkt_fatal("cannot open %s for writing", path);
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

void metrics_log(struct trainer *t, const struct step_metrics *m)
{
    fprintf(t->metrics,
            "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, \"tokens\": %.0f, "
            "\"tokens_per_sec\": %.6g, \"step_ms\": %.6g",
            (long long)m->step, m->loss, m->lr, m->grad_norm, m->tokens, m->tokens_per_sec, m->step_ms);
    if (m->has_val)
        fprintf(t->metrics, ", \"val_loss\": %.9g", m->val_loss);
    fprintf(t->metrics, "}\n");
    fflush(t->metrics);

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
    if (t->metrics)
        fclose(t->metrics);
    t->metrics = NULL;
}
