// model_metrics.h: what a model reports, declared by the model: its
// statistics (floats a row of a batch: model.stats [rows, n_stats]), how
// they are reduced (summed over the rows, the micro-batches and the ranks)
// and the figures made of them (one sum divided by another, or by the rows),
// with the name each printout gives a figure. The trainer's progress lines,
// evaluation lines, --metrics CSV and summary line print what a model
// declares here, through model_metrics_format; nothing in the trainer knows
// what a figure means, except that figure 0 is the loss. Pure functions.
#ifndef VGPU_MODEL_METRICS_H
#define VGPU_MODEL_METRICS_H

#include <stddef.h>

#define MODEL_MAX_STATS 8   // statistics one row may carry
#define MODEL_MAX_METRICS 8 // figures one model may report
#define MODEL_PER_ROW (-1)  // a figure's divisor: the rows the sums are over

// One figure: sums[sum] / (per == MODEL_PER_ROW ? rows : sums[per]) * scale.
struct model_metric {
    const char *column; // its --metrics CSV column ("accuracy")
    const char *train;  // its name in progress lines and the bar ("acc"); NULL: evaluation only
                        // (its CSV column stays empty in train rows)
    const char *eval;   // its name in evaluation lines ("test_acc")
    int summary;        // 1: also in the summary line, as <eval>=value
    int sum;            // the statistic summed: a column of stats, [0, n_stats)
    int per;            // the statistic it is divided by, or MODEL_PER_ROW (a mean over rows)
    double scale;       // times this; 0: not scaled (bits from nats: 1 / ln 2)
};

// A model's declaration (a static table: model_ops.metrics). metric[0] is
// the loss: the progress window's loss (the summary's train_loss, the
// divergence warning) is figure 0 of the training sums.
struct model_metrics {
    int n_stats;   // floats one row of stats holds, <= MODEL_MAX_STATS
    int n_metrics; // figures in metric[], 1..MODEL_MAX_METRICS
    struct model_metric metric[MODEL_MAX_METRICS];
};

// A classifier over math_softmax_xent's stats row (loss, top-1 hit, top-5
// hit): loss, accuracy and top-5 accuracy, means over rows (the MLP's).
extern const struct model_metrics model_metrics_xent;

// 0 when mm is well formed (counts in range, every figure named, its
// statistics inside a row), else VGPU_EINVAL.
int model_metrics_check(const struct model_metrics *mm);

// The figures values[n_metrics] of sums[n_stats], statistics summed over
// `rows` rows.
void model_metrics_values(const struct model_metrics *mm, const double *sums, double rows,
                          double *values);

// Where figures are printed, and how (the MLP's, for example).
enum model_metrics_place {
    METRICS_PROGRESS,   // "  loss 0.3012  acc 0.8931": the training figures, %.4f
    METRICS_EVAL,       // "  test_loss 0.3391  test_acc 0.8790  top5 0.9978": every figure
    METRICS_SUMMARY,    // " test_loss=0.3391 test_acc=0.8790": the summary's figures
    METRICS_CSV_HEADER, // ",loss,accuracy,top5": the columns
    METRICS_CSV_TRAIN,  // ",0.301200,0.893100,": training figures, %.6f, others empty
    METRICS_CSV_EVAL,   // ",0.339100,0.879000,0.997800": every figure
    METRICS_CSV_EMPTY,  // ",,,": a row without figures (a resume's)
};

// Writes the figures values[n_metrics] (unread for the header and empty
// rows: may be NULL) as `place` prints them into buf[bytes]. Returns what
// snprintf would: the length of the whole text (>= bytes: cut short).
int model_metrics_format(char *buf, size_t bytes, const struct model_metrics *mm,
                         const double *values, enum model_metrics_place place);

#endif
