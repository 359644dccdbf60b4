// test_train_staging.c: batches onto the device through the trainer's
// staging (train_step.c), one case per input path: sequences of tokens
// picked by the sampler, with a label a position, into int32 and uint8
// inputs; image codes decoded by their table; float rows as they are; and
// a model that cannot take the data's rows refused before anything is made.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "status.h"
#include "test_rank.h"
#include "train_internal.h"

#define CONTEXT 16
#define ROWS 4 // a rank's piece: the staging's rows

// A language model's statistics (the staging reads only how many a row has).
static const struct model_metrics lm_metrics_ = {
    .n_stats = 2,
    .n_metrics = 1,
    .metric = {{.column = "loss", .train = "loss", .eval = "val_loss", .sum = 0, .per = 1}},
};
static const struct model_ops seq_ops_ = {.name = "seq", .metrics = &lm_metrics_};

// A trainer with just what staging reads: one rank, the config, the data,
// a model's batch shape and its device input and labels.
struct fixture {
    struct job job;
    struct train_options opts;
    struct train_data data;
    struct trainer t;
};

static void fixture_init_(struct fixture *f, const struct model_batch *batch)
{
    memset(f, 0, sizeof *f);
    f->job.v = test_rank_room(16u << 20);
    f->job.size = 1;
    train_config_defaults(&f->job.cfg);
    f->job.cfg.train.batch_size = 2 * ROWS;
    f->t = (struct trainer){.job = &f->job, .dev = f->job.v, .cfg = &f->job.cfg, .opts = &f->opts,
                            .data = &f->data};
    f->t.model = (struct model){.ops = &seq_ops_, .max_rows = ROWS, .batch = *batch};
    const size_t elem = batch->input == MODEL_INPUT_U8 ? 1 : 4;
    assert_int_equal(vgpu_malloc(f->t.dev, &f->t.model.input,
                                 ROWS * (size_t)batch->input_width * elem), 0);
    void *labels;
    assert_int_equal(vgpu_malloc(f->t.dev, &labels,
                                 ROWS * (size_t)batch->labels_per_row * sizeof(int32_t)), 0);
    f->t.model.labels = labels;
}

static void fixture_free_(struct fixture *f)
{
    train_step_free(&f->t);
    vgpu_free(f->t.dev, f->t.model.input);
    vgpu_free(f->t.dev, f->t.model.labels);
    train_free_data(&f->data);
    assert_int_equal(test_rank_in_use(), 0); // the device's codes and table too
    test_rank_release_room();
}

// 200 bytes of text, and the same text as a test set.
static void sequences_(struct train_data *data, uint8_t *text, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++)
        text[i] = (uint8_t)((i * 7 + 3) % 251);
    assert_int_equal(dataset_make_sequences(&data->train, text, bytes, CONTEXT), 0);
    assert_int_equal(dataset_make_sequences(&data->test, text, bytes, CONTEXT), 0);
}

// The rows the device holds are the windows of the text the indices name,
// with their next bytes as labels, one a position.
static void check_sequences_(struct fixture *f, const uint8_t *text, const uint32_t *indices,
                             long rows)
{
    int32_t input[ROWS * CONTEXT], labels[ROWS * CONTEXT];
    uint8_t bytes[ROWS * CONTEXT];
    const int wide = f->t.model.batch.input == MODEL_INPUT_I32;
    assert_int_equal(vgpu_memcpy_dtoh(f->t.dev, wide ? (void *)input : (void *)bytes,
                                      f->t.model.input,
                                      (size_t)rows * CONTEXT * (wide ? sizeof(int32_t) : 1)), 0);
    assert_int_equal(vgpu_memcpy_dtoh(f->t.dev, labels, f->t.model.labels,
                                      (size_t)rows * CONTEXT * sizeof(int32_t)), 0);
    for (long i = 0; i < rows; i++)
        for (int j = 0; j < CONTEXT; j++) {
            const size_t at = (size_t)indices[i] * CONTEXT + (size_t)j, k = (size_t)i * CONTEXT + j;
            assert_int_equal(wide ? input[k] : bytes[k], text[at]);
            assert_int_equal(labels[k], text[at + 1]);
        }
}

// Rank 1's piece of a global batch of sequences, as a step loads it, and an
// evaluation chunk of the test set.
static void sequences_through_(enum model_input input, int want_path)
{
    const struct model_batch batch = {.input = input, .input_width = CONTEXT,
                                      .labels_per_row = CONTEXT};
    struct fixture f;
    fixture_init_(&f, &batch);
    uint8_t text[200];
    sequences_(&f.data, text, sizeof text);
    assert_int_equal(train_input_path(&batch, &f.data.train), want_path);
    assert_int_equal(train_staging_prepare(&f.t, ROWS), 0);
    assert_int_equal(f.t.staging.path, want_path);
    struct sampler s;
    struct batch_slice b;
    assert_int_equal(sampler_init(&s, f.data.train.count, 2 * ROWS, 1, 3, 2, NULL, 0), 0);
    assert_int_equal(sampler_next(&s, 1, &b), 1);
    assert_int_equal(b.count, ROWS);
    assert_int_equal(train_load_rows(&f.t, &f.t.model, &f.data.train, b.indices + b.offset,
                                     b.count), 0);
    check_sequences_(&f, text, b.indices + b.offset, b.count);
    const uint32_t chunk[3] = {0, 1, 2};
    assert_int_equal(train_load_rows(&f.t, &f.t.model, &f.data.test, chunk, 3), 0);
    check_sequences_(&f, text, chunk, 3);
    sampler_free(&s);
    fixture_free_(&f);
}

static void test_sequences_int32(void **state)
{
    (void)state;
    sequences_through_(MODEL_INPUT_I32, TRAIN_INPUT_WIDEN);
}

static void test_sequences_uint8(void **state)
{
    (void)state;
    sequences_through_(MODEL_INPUT_U8, TRAIN_INPUT_TOKENS);
}

// Images: 8-bit codes decoded by the set's table on the device, or float
// rows copied; a class a row.
static void test_images(void **state)
{
    (void)state;
    const struct model_batch batch = {.input = MODEL_INPUT_F32, .input_width = 5,
                                      .labels_per_row = 1};
    for (int coded = 0; coded < 2; coded++) {
        struct fixture f;
        fixture_init_(&f, &batch);
        assert_int_equal(dataset_make_synthetic(&f.data.train, 10, 5, 3, 7, 0), 0);
        if (coded) { // the values as codes with a table: value = code / 255
            struct dataset *ds = &f.data.train;
            ds->codes = malloc(10 * 5);
            for (int k = 0; k < 50; k++)
                ds->codes[k] = (uint8_t)(k * 5);
            for (int c = 0; c < 256; c++)
                ds->lut[c] = (float)c / 255.0f;
            free(ds->images);
            ds->images = NULL;
        }
        assert_int_equal(train_staging_prepare(&f.t, ROWS), 0);
        assert_int_equal(f.t.staging.path, coded ? TRAIN_INPUT_DECODE : TRAIN_INPUT_COPY);
        const uint32_t idx[ROWS] = {9, 2, 5, 0};
        assert_int_equal(train_load_rows(&f.t, &f.t.model, &f.data.train, idx, ROWS), 0);
        float got[ROWS * 5], want[ROWS * 5];
        int32_t labels[ROWS];
        assert_int_equal(vgpu_memcpy_dtoh(f.t.dev, got, f.t.model.input, sizeof got), 0);
        assert_int_equal(vgpu_memcpy_dtoh(f.t.dev, labels, f.t.model.labels, sizeof labels), 0);
        dataset_gather(&f.data.train, idx, ROWS, want);
        assert_memory_equal(got, want, sizeof got);
        for (int i = 0; i < ROWS; i++)
            assert_int_equal(labels[i], f.data.train.labels[idx[i]]);
        fixture_free_(&f);
    }
}

// A model whose rows are not the data's: refused (VGPU_ECONFIG, said),
// nothing staged.
static void test_mismatch_refused(void **state)
{
    (void)state;
    const struct model_batch refused[] = {
        {.input = MODEL_INPUT_F32, .input_width = CONTEXT, .labels_per_row = CONTEXT}, // values
        {.input = MODEL_INPUT_I32, .input_width = CONTEXT, .labels_per_row = 1},       // a class
        {.input = MODEL_INPUT_I32, .input_width = CONTEXT / 2, .labels_per_row = CONTEXT / 2},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        struct fixture f;
        fixture_init_(&f, &refused[i]);
        uint8_t text[200];
        sequences_(&f.data, text, sizeof text);
        assert_int_equal(train_input_path(&refused[i], &f.data.train), VGPU_EINVAL);
        assert_int_equal(train_staging_prepare(&f.t, ROWS), VGPU_ECONFIG);
        assert_null(f.t.staging.host_labels);
        fixture_free_(&f);
    }
    // Tokens where a model takes values, and values where it takes tokens.
    struct dataset images = {.features = 5, .classes = 3};
    const struct model_batch tokens = {.input = MODEL_INPUT_U8, .input_width = 5,
                                       .labels_per_row = 1};
    assert_int_equal(train_input_path(&tokens, &images), VGPU_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sequences_int32),
        cmocka_unit_test(test_sequences_uint8),
        cmocka_unit_test(test_images),
        cmocka_unit_test(test_mismatch_refused),
    };
    return cmocka_run_group_tests(tests, NULL, test_rank_group_teardown);
}
