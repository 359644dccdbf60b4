// test_train_sizing.c: the trainer's pure sizing (worker/train_sizing.c): the
// model's shape, each rank's rows, the deterministic mode's micro-batches,
// and the device bytes a rank needs, checked against hand-computed values and
// against what the allocations really take on a CPU device.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "models/mlp/mlp.h"
#include "optim.h"
#include "status.h"
#include "test_rank.h"
#include "test_util.h"
#include "train_sizing.h"

// A config with a small model: 784 -> 64 -> 32 -> 10, batch 1024.
static void small_config_(struct train_config *cfg)
{
    char err[256];
    train_config_defaults(cfg);
    assert_int_equal(train_config_apply_override(cfg, NULL, "model.hidden=64,32", err, sizeof err), 0);
    cfg->train.batch_size = 1024;
}

// A training set's shape (sizing reads features, classes, and whether it is coded).
static struct dataset shape_(int features, int coded)
{
    static uint8_t one_code;
    return (struct dataset){.features = features, .classes = 10, .codes = coded ? &one_code : NULL};
}

static void test_model_dims(void **state)
{
    (void)state;
    struct train_config cfg;
    small_config_(&cfg);
    struct dataset train = shape_(784, 0);
    int dims[MLP_MAX_DIMS], n = 0;
    assert_int_equal(mlp_dims_for(&cfg, &train, dims, &n), 0);
    assert_int_equal(n, 4);
    assert_int_equal(dims[0], 784);
    assert_int_equal(dims[1], 64);
    assert_int_equal(dims[2], 32);
    assert_int_equal(dims[3], 10);
    // As many hidden layers as a config list holds: the model holds them all.
    cfg.model.hidden.count = CONFIG_LIST_MAX;
    for (int i = 0; i < CONFIG_LIST_MAX; i++)
        cfg.model.hidden.v[i] = 8 + i;
    assert_int_equal(mlp_dims_for(&cfg, &train, dims, &n), 0);
    assert_int_equal(n, CONFIG_LIST_MAX + 2);
    assert_int_equal(dims[CONFIG_LIST_MAX], 8 + CONFIG_LIST_MAX - 1);
}

static void test_rank_rows(void **state)
{
    (void)state;
    struct train_config cfg;
    small_config_(&cfg);
    cfg.train.batch_size = 256;
    // Equal split: pieces differ by at most one row, lower ranks first.
    assert_int_equal(train_rank_rows(&cfg, 3, 0), 86);
    assert_int_equal(train_rank_rows(&cfg, 3, 1), 85);
    assert_int_equal(train_rank_rows(&cfg, 3, 2), 85);
    // Weighted: 0.75 / 0.25.
    cfg.train.batch_weights.count = 2;
    cfg.train.batch_weights.v[0] = 3;
    cfg.train.batch_weights.v[1] = 1;
    assert_int_equal(train_rank_rows(&cfg, 2, 0), 192);
    assert_int_equal(train_rank_rows(&cfg, 2, 1), 64);
    // Deterministic mode: one micro-batch, ceil(256 / 3) rows, whatever the rank.
    cfg.train.deterministic = 1;
    cfg.train.micro_batches = 3;
    assert_int_equal(train_micro_rows(&cfg), 86);
    assert_int_equal(train_rank_rows(&cfg, 2, 1), 86);
}

static void test_micro_split(void **state)
{
    (void)state;
    struct train_config cfg;
    small_config_(&cfg);
    cfg.train.micro_batches = 8;
    int per[TRAIN_MAX_RANKS];
    train_micro_split(&cfg, 3, per);
    assert_int_equal(per[0], 3);
    assert_int_equal(per[1], 3);
    assert_int_equal(per[2], 2);
    train_micro_split(&cfg, 1, per);
    assert_int_equal(per[0], 8);
    // More ranks than micro-batches: some ranks compute none, the sum holds.
    train_micro_split(&cfg, 12, per);
    int sum = 0;
    for (int r = 0; r < 12; r++)
        sum += per[r];
    assert_int_equal(sum, 8);
    assert_int_equal(per[11], 0);
}

static void test_max_rows(void **state)
{
    (void)state;
    struct train_config cfg;
    small_config_(&cfg);
    // 1024 over 2 ranks: 512 rows; over 8: 128 rows, but evaluation chunks need EVAL_CHUNK.
    assert_int_equal(train_max_rows(&cfg, 2, 1), 512);
    assert_int_equal(train_max_rows(&cfg, 8, 1), EVAL_CHUNK);
    // Too many ranks to split: sized for the whole batch.
    assert_int_equal(train_max_rows(&cfg, TRAIN_MAX_RANKS + 1, 1), 1024);
    // Dynamic balance may give a rank twice an equal share.
    cfg.train.balance = BALANCE_DYNAMIC;
    assert_int_equal(train_max_rows(&cfg, 4, 1), 512);
    cfg.train.balance = BALANCE_STATIC;
    // Deterministic: one micro-batch at a time.
    cfg.train.deterministic = 1;
    cfg.train.micro_batches = 2;
    assert_int_equal(train_max_rows(&cfg, 4, 1), 512);
    // Staging holds whole global batches only for --verify's replay.
    assert_int_equal(train_staging_rows(&cfg, 512, 0), 512);
    assert_int_equal(train_staging_rows(&cfg, 512, 1), 1024);
}

// Evaluation chunks: EVAL_CHUNK rows of one label; sequences by positions,
// at least one row; the model is sized for the larger of a batch's piece and
// a chunk.
static void test_eval_rows(void **state)
{
    (void)state;
    assert_int_equal(train_eval_rows(1), EVAL_CHUNK);
    assert_int_equal(train_eval_rows(0), EVAL_CHUNK);
    assert_int_equal(train_eval_rows(64), EVAL_CHUNK_LABELS / 64);
    assert_int_equal(train_eval_rows(EVAL_CHUNK_LABELS / 2), 2);
    assert_int_equal(train_eval_rows(EVAL_CHUNK_LABELS / 2 + 1), 1);
    assert_int_equal(train_eval_rows(EVAL_CHUNK_LABELS * 4), 1);
    struct train_config cfg;
    small_config_(&cfg);
    cfg.train.batch_size = 32; // 16 rows a rank over 2
    assert_int_equal(train_max_rows(&cfg, 2, 1024), 16);
    assert_int_equal(train_max_rows(&cfg, 2, 64), EVAL_CHUNK_LABELS / 64);
}

// The formula, term by term, for the modes and options that add to it.
static void test_device_bytes_terms(void **state)
{
    (void)state;
    struct train_config cfg;
    small_config_(&cfg);
    struct dataset floats = shape_(784, 0), coded = shape_(784, 1);
    static const int dims[] = {784, 64, 32, 10};
    struct mlp layout;
    assert_int_equal(mlp_layout(&layout, dims, 4, 512), 0);
    const uint64_t model = mlp_device_bytes(&layout, 2); // adamw: two floats per parameter
    const uint64_t params = layout.param_count * sizeof(float);
    assert_int_equal(train_device_bytes(&cfg, &floats, 2, 0), model);
    // Its parts (--plan): the flat buffers, each rounded up once, and the rest.
    struct train_bytes parts;
    train_device_parts(&cfg, &floats, 2, 0, &parts);
    const uint64_t flat = params + VGPU_MALLOC_ALIGN;
    assert_int_equal(parts.param_count, layout.param_count);
    assert_int_equal(parts.params, flat);
    assert_int_equal(parts.grads, flat);
    assert_int_equal(parts.optimizer, 2 * flat);
    assert_int_equal(parts.activations, model - 4 * flat);
    assert_int_equal(parts.staging + parts.deterministic + parts.verify, 0);
    assert_int_equal(parts.total, model);
    // Coded sets: their codes and the value table on the device.
    assert_int_equal(train_device_bytes(&cfg, &coded, 2, 0),
                     model + 512 * 784 + VGPU_MALLOC_ALIGN + sizeof coded.lut + VGPU_MALLOC_ALIGN);
    train_device_parts(&cfg, &coded, 2, 0, &parts);
    assert_int_equal(parts.staging, 512 * 784 + VGPU_MALLOC_ALIGN + sizeof coded.lut +
                                        VGPU_MALLOC_ALIGN);
    // --verify: a second model for the whole batch on rank 0 (and whole-batch staging).
    struct mlp whole;
    assert_int_equal(mlp_layout(&whole, dims, 4, 1024), 0);
    assert_int_equal(train_device_bytes(&cfg, &floats, 2, 1), model + mlp_device_bytes(&whole, 2));
    // SGD keeps one float per parameter.
    cfg.train.optimizer = OPTIM_SGD;
    assert_int_equal(train_device_bytes(&cfg, &floats, 2, 0), mlp_device_bytes(&layout, 1));
    cfg.train.optimizer = OPTIM_ADAMW;
    // Deterministic, 4 micro-batches over 3 ranks: the busiest rank holds 2
    // micro-batch gradients, plus the tree's scratch.
    cfg.train.deterministic = 1;
    cfg.train.micro_batches = 4;
    assert_int_equal(mlp_layout(&layout, dims, 4, EVAL_CHUNK), 0);
    assert_int_equal(train_device_bytes(&cfg, &floats, 3, 0),
                     mlp_device_bytes(&layout, 2) + 2 * params + VGPU_MALLOC_ALIGN +
                         vgpu_tree_scratch_bytes(3, 2, layout.param_count) + VGPU_MALLOC_ALIGN);
    // Unsizable jobs say 0.
    assert_int_equal(train_device_bytes(&cfg, &floats, TRAIN_MAX_RANKS + 1, 0), 0);
}

// What a rank allocates in normal mode (model, optimizer, codes and table)
// fits in exactly train_device_bytes on a real CPU device arena.
static void test_device_bytes_fit(void **state)
{
    (void)state;
    struct train_config cfg;
    small_config_(&cfg);
    struct dataset coded = shape_(784, 1);
    const int nranks = 2;
    const uint64_t need = train_device_bytes(&cfg, &coded, nranks, 0);
    vgpu_t *dev = test_rank_room(need);
    int dims[MLP_MAX_DIMS], n;
    assert_int_equal(mlp_dims_for(&cfg, &coded, dims, &n), 0);
    const int rows = train_max_rows(&cfg, nranks, 1);
    struct mlp m;
    struct optimizer opt;
    void *codes, *lut;
    assert_int_equal(mlp_init(&m, dev, dims, n, rows), 0);
    assert_int_equal(optim_init(&opt, dev, &cfg, m.param_count), 0);
    assert_int_equal(vgpu_malloc(dev, &codes, (size_t)train_staging_rows(&cfg, rows, 0) * 784), 0);
    assert_int_equal(vgpu_malloc(dev, &lut, sizeof coded.lut), 0);
    assert_true(test_rank_in_use() <= need);
    vgpu_free(dev, lut);
    vgpu_free(dev, codes);
    optim_free(&opt, dev);
    mlp_free(&m, dev);
    test_rank_release_room();
}

// The largest collective: the optimizer state's broadcast (AdamW: two floats
// a parameter), or the gradients' all-reduce (plain SGD: one).
static void test_largest_collective(void **state)
{
    (void)state;
    struct train_config cfg;
    small_config_(&cfg);
    struct dataset flat = shape_(784, 0);
    // 784-64-32-10: 784*64+64 + 64*32+32 + 32*10+10 = 52650 parameters
    char err[256];
    assert_int_equal(train_config_apply_override(&cfg, NULL, "train.optimizer=adamw", err, sizeof err), 0);
    assert_int_equal(train_largest_collective_bytes(&cfg, &flat), 52650ull * 4 * 2);
    assert_int_equal(train_config_apply_override(&cfg, NULL, "train.optimizer=sgd", err, sizeof err), 0);
    cfg.train.momentum = 0;
    assert_true(train_largest_collective_bytes(&cfg, &flat) >= 52650ull * 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_dims),
        cmocka_unit_test(test_rank_rows),
        cmocka_unit_test(test_micro_split),
        cmocka_unit_test(test_max_rows),
        cmocka_unit_test(test_eval_rows),
        cmocka_unit_test(test_device_bytes_terms),
        cmocka_unit_test(test_device_bytes_fit),
        cmocka_unit_test(test_largest_collective),
    };
    return cmocka_run_group_tests(tests, NULL, test_rank_group_teardown);
}
