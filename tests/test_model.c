// test_model.c: the model registry (models/models.h: every model.type value
// has a table with every method and a well-formed declaration of its
// figures) and model_metrics.c: figures reduced from summed statistics and
// printed as each place prints them, for the MLP's classifier figures (the
// exact text of vgpu_train's lines) and for a language model's (loss and
// bits per byte per position).
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model.h"
#include "status.h"

// Every line of models/models.h: a table with its own name, every method,
// and figures model_metrics_check accepts; model.type parses to it.
static void test_registry(void **state)
{
    (void)state;
    int count = 0;
#define CHECK_(id, text, table)                                                              \
    do {                                                                                     \
        const struct model_ops *ops = model_find(id);                                        \
        assert_non_null(ops);                                                                \
        assert_string_equal(ops->name, text);                                                \
        assert_int_equal(model_metrics_check(ops->metrics), 0);                              \
        assert_true(ops->layout && ops->device_bytes && ops->alloc && ops->free &&           \
                    ops->init_params && ops->forward && ops->backward && ops->eval_stats &&  \
                    ops->pass_flops && ops->tensor_count && ops->tensor);                    \
        struct train_config cfg;                                                             \
        char err[256];                                                                       \
        train_config_defaults(&cfg);                                                         \
        assert_int_equal(train_config_apply_override(&cfg, NULL, "model.type=" text, err,    \
                                                     sizeof err), 0);                        \
        assert_int_equal((int)cfg.model.type, id);                                           \
        assert_ptr_equal(model_metrics_for(&cfg), ops->metrics);                             \
        count++;                                                                             \
    } while (0);
    MODELS(CHECK_)
#undef CHECK_
    assert_true(count >= 1);
    assert_null(model_find(count));
    assert_null(model_find(-1));
    assert_ptr_equal(model_find(MODEL_MLP)->metrics, &model_metrics_xent);
}

// A model.type no table has: model_layout says so, and leaves nothing to free.
static void test_unknown_type(void **state)
{
    (void)state;
    struct train_config cfg;
    train_config_defaults(&cfg);
    cfg.model.type = (enum model_kind)99;
    struct dataset train = {.count = 1, .features = 4, .classes = 3};
    struct model m;
    assert_int_equal(model_layout(&m, &cfg, &train, 8), VGPU_ECONFIG);
    assert_null(model_metrics_for(&cfg));
    model_free(&m, NULL);
}

// The classifier's figures: sums over rows (and ranks) divided by the rows,
// printed exactly as vgpu_train's progress, eval, summary lines and CSV rows
// have them.
static void test_xent_figures(void **state)
{
    (void)state;
    const struct model_metrics *mm = &model_metrics_xent;
    // Two ranks' shares of 200 rows: loss sums, top-1 hits, top-5 hits.
    const double rank0[3] = {30.5, 88, 99}, rank1[3] = {29.5, 92, 98};
    double sums[3], values[MODEL_MAX_METRICS];
    for (int k = 0; k < 3; k++)
        sums[k] = rank0[k] + rank1[k];
    model_metrics_values(mm, sums, 200, values);
    assert_true(values[0] == 60.0 / 200 && values[1] == 180.0 / 200 && values[2] == 197.0 / 200);
    char buf[256];
    model_metrics_format(buf, sizeof buf, mm, values, METRICS_PROGRESS);
    assert_string_equal(buf, "  loss 0.3000  acc 0.9000");
    model_metrics_format(buf, sizeof buf, mm, values, METRICS_EVAL);
    assert_string_equal(buf, "  test_loss 0.3000  test_acc 0.9000  top5 0.9850");
    model_metrics_format(buf, sizeof buf, mm, values, METRICS_SUMMARY);
    assert_string_equal(buf, " test_loss=0.3000 test_acc=0.9000");
    model_metrics_format(buf, sizeof buf, mm, NULL, METRICS_CSV_HEADER);
    assert_string_equal(buf, ",loss,accuracy,top5");
    model_metrics_format(buf, sizeof buf, mm, values, METRICS_CSV_TRAIN);
    assert_string_equal(buf, ",0.300000,0.900000,");
    model_metrics_format(buf, sizeof buf, mm, values, METRICS_CSV_EVAL);
    assert_string_equal(buf, ",0.300000,0.900000,0.985000");
    model_metrics_format(buf, sizeof buf, mm, NULL, METRICS_CSV_EMPTY);
    assert_string_equal(buf, ",,,");
    // An unmeasured run (nan) prints as it always has.
    const double unmeasured[3] = {NAN, NAN, NAN};
    model_metrics_format(buf, sizeof buf, mm, unmeasured, METRICS_SUMMARY);
    assert_string_equal(buf, " test_loss=nan test_acc=nan");
}

// A language model's declaration, as the GPT issue will write one: a row
// (a sequence) carries its loss summed over positions and its positions;
// the loss is a mean per position (not per row), bits per byte the same in
// base 2.
static const struct model_metrics lm_ = {
    .n_stats = 2,
    .n_metrics = 2,
    .metric = {
        {.column = "loss", .train = "loss", .eval = "val_loss", .summary = 1, .sum = 0, .per = 1},
        {.column = "bpb", .train = "bpb", .eval = "val_bpb", .summary = 1, .sum = 0, .per = 1,
         .scale = 1.0 / M_LN2},
    },
};

static void test_per_position_figures(void **state)
{
    (void)state;
    assert_int_equal(model_metrics_check(&lm_), 0);
    // Rank 0: 3 rows of 4 positions at ln 4 a position; rank 1: 1 row of 4
    // at ln 2 (rows of unequal loss: a mean of the ranks' means would be wrong).
    const double rank0[2] = {12 * log(4.0), 12}, rank1[2] = {4 * log(2.0), 4};
    const double sums[2] = {rank0[0] + rank1[0], rank0[1] + rank1[1]};
    double values[MODEL_MAX_METRICS];
    model_metrics_values(&lm_, sums, 4, values); // 4 rows: not the divisor
    const double want = (12 * log(4.0) + 4 * log(2.0)) / 16;
    assert_true(fabs(values[0] - want) < 1e-15);
    assert_true(fabs(values[1] - want / log(2.0)) < 1e-15); // 1.75 bits
    char buf[256];
    model_metrics_format(buf, sizeof buf, &lm_, values, METRICS_PROGRESS);
    assert_string_equal(buf, "  loss 1.2130  bpb 1.7500");
    model_metrics_format(buf, sizeof buf, &lm_, values, METRICS_EVAL);
    assert_string_equal(buf, "  val_loss 1.2130  val_bpb 1.7500");
    model_metrics_format(buf, sizeof buf, &lm_, values, METRICS_SUMMARY);
    assert_string_equal(buf, " val_loss=1.2130 val_bpb=1.7500");
    model_metrics_format(buf, sizeof buf, &lm_, NULL, METRICS_CSV_HEADER);
    assert_string_equal(buf, ",loss,bpb");
    model_metrics_format(buf, sizeof buf, &lm_, values, METRICS_CSV_TRAIN);
    assert_string_equal(buf, ",1.213008,1.750000");
    // Cut short: the length of the whole text, and a terminated prefix.
    char small[8];
    assert_int_equal(model_metrics_format(small, sizeof small, &lm_, values, METRICS_PROGRESS),
                     (int)strlen("  loss 1.2130  bpb 1.7500"));
    assert_string_equal(small, "  loss ");
}

// Declarations model_metrics_check refuses.
static void test_check(void **state)
{
    (void)state;
    struct model_metrics bad = lm_;
    assert_int_equal(model_metrics_check(&bad), 0);
    bad.metric[1].sum = 2; // outside a row
    assert_int_equal(model_metrics_check(&bad), VGPU_EINVAL);
    bad = lm_;
    bad.metric[1].per = 2;
    assert_int_equal(model_metrics_check(&bad), VGPU_EINVAL);
    bad = lm_;
    bad.metric[0].train = NULL; // the loss must be tracked while training
    assert_int_equal(model_metrics_check(&bad), VGPU_EINVAL);
    bad = lm_;
    bad.metric[1].column = NULL;
    assert_int_equal(model_metrics_check(&bad), VGPU_EINVAL);
    bad = lm_;
    bad.n_stats = MODEL_MAX_STATS + 1;
    assert_int_equal(model_metrics_check(&bad), VGPU_EINVAL);
    bad = lm_;
    bad.n_metrics = 0;
    assert_int_equal(model_metrics_check(&bad), VGPU_EINVAL);
    assert_int_equal(model_metrics_check(NULL), VGPU_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),
        cmocka_unit_test(test_unknown_type),
        cmocka_unit_test(test_xent_figures),
        cmocka_unit_test(test_per_position_figures),
        cmocka_unit_test(test_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
