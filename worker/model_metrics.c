// model_metrics.c: figures from a model's summed statistics, and their
// printouts (model_metrics.h).
#include "model_metrics.h"

#include <stdio.h>
#include <vgpu/vgpu_math.h>

#include "status.h"

_Static_assert(XENT_STATS == 3, "model_metrics_xent reads softmax_xent's three statistics");

const struct model_metrics model_metrics_xent = {
    .n_stats = XENT_STATS,
    .n_metrics = 3,
    .metric = {
        {.column = "loss", .train = "loss", .eval = "test_loss", .summary = 1, .sum = 0,
         .per = MODEL_PER_ROW},
        {.column = "accuracy", .train = "acc", .eval = "test_acc", .summary = 1, .sum = 1,
         .per = MODEL_PER_ROW},
        {.column = "top5", .train = NULL, .eval = "top5", .summary = 0, .sum = 2,
         .per = MODEL_PER_ROW},
    },
};

int model_metrics_check(const struct model_metrics *mm)
{
    if (!mm || mm->n_stats < 1 || mm->n_stats > MODEL_MAX_STATS || mm->n_metrics < 1 ||
        mm->n_metrics > MODEL_MAX_METRICS)
        return VGPU_EINVAL;
    for (int i = 0; i < mm->n_metrics; i++) {
        const struct model_metric *m = &mm->metric[i];
        if (!m->column || !m->eval || m->sum < 0 || m->sum >= mm->n_stats ||
            m->per < MODEL_PER_ROW || m->per >= mm->n_stats)
            return VGPU_EINVAL;
    }
    return mm->metric[0].train ? 0 : VGPU_EINVAL; // the loss is tracked while training
}

void model_metrics_values(const struct model_metrics *mm, const double *sums, double rows,
                          double *values)
{
    for (int i = 0; i < mm->n_metrics; i++) {
        const struct model_metric *m = &mm->metric[i];
        values[i] = sums[m->sum] / (m->per == MODEL_PER_ROW ? rows : sums[m->per]);
        if (m->scale != 0)
            values[i] *= m->scale;
    }
}

int model_metrics_format(char *buf, size_t bytes, const struct model_metrics *mm,
                         const double *values, enum model_metrics_place place)
{
    size_t len = 0;
    if (bytes)
        buf[0] = '\0';
    for (int i = 0; i < mm->n_metrics; i++) {
        const struct model_metric *m = &mm->metric[i];
        char *at = len < bytes ? buf + len : NULL;
        const size_t room = len < bytes ? bytes - len : 0;
        int n = 0;
        switch (place) {
        case METRICS_PROGRESS:
            if (m->train)
                n = snprintf(at, room, "  %s %.4f", m->train, values[i]);
            break;
        case METRICS_EVAL:
            n = snprintf(at, room, "  %s %.4f", m->eval, values[i]);
            break;
        case METRICS_SUMMARY:
            if (m->summary)
                n = snprintf(at, room, " %s=%.4f", m->eval, values[i]);
            break;
        case METRICS_CSV_HEADER:
            n = snprintf(at, room, ",%s", m->column);
            break;
        case METRICS_CSV_TRAIN:
            n = m->train ? snprintf(at, room, ",%.6f", values[i]) : snprintf(at, room, ",");
            break;
        case METRICS_CSV_EVAL:
            n = snprintf(at, room, ",%.6f", values[i]);
            break;
        case METRICS_CSV_EMPTY:
            n = snprintf(at, room, ",");
            break;
        }
        len += n > 0 ? (size_t)n : 0;
    }
    return (int)len;
}
