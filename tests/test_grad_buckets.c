// test_grad_buckets.c: the overlapped all-reduce (train.bucket_mb).
// - The buckets' cut at its bounds.
// - Each model's promise (struct grads_ready): at every tell, the tail it
//   names already holds the pass's final bits, the tells descend and end
//   at 0. A tell one layer early (planted) fails here, whatever the timing.
// - The thread issues exactly the buckets told final, highest first, and
//   finish issues the rest (one rank: counted by the collectives' calls).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "grad_buckets.h"
#include "model.h"
#include "status.h"
#include "test_rank.h"

static void test_cut(void **state)
{
    (void)state;
    size_t size = 0;
    assert_int_equal(grad_buckets_count_for(0, 1000, &size), 0);
    assert_int_equal(grad_buckets_count_for(1, 1, &size), 1);
    assert_int_equal(size, GRAD_BUCKET_ALIGN); // never below the alignment
    assert_int_equal(grad_buckets_count_for(128, 64, &size), 2);
    assert_int_equal(size, 64);
    assert_int_equal(grad_buckets_count_for(129, 64, &size), 3);
    assert_int_equal(grad_buckets_count_for(128, 65, &size), 1); // rounded up to 128
    assert_int_equal(size, 128);
    assert_int_equal(grad_buckets_count_for(1000000, 262144, &size), 4);
    assert_int_equal(size, 262144);
}

// ---- the models' tells ----

#define MAX_TELLS 64

struct recorder {
    vgpu_t *dev;
    const struct model *m;
    int n;
    size_t from[MAX_TELLS];
    float *tail[MAX_TELLS]; // host copies of grads[from, param_count) at the tell
};

static void record_(void *arg, size_t from)
{
    struct recorder *r = arg;
    assert_true(r->n < MAX_TELLS);
    const size_t floats = r->m->param_count - from;
    float *copy = malloc((floats ? floats : 1) * sizeof *copy);
    assert_non_null(copy);
    assert_int_equal(vgpu_memcpy_dtoh(r->dev, copy, r->m->grads + from, floats * sizeof *copy), 0);
    r->from[r->n] = from;
    r->tail[r->n++] = copy;
}

static uint32_t next_(uint64_t *x) // xorshift64
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return (uint32_t)(*x >> 32);
}

static void fill_(struct dataset *ds, int features, int classes, int label_width, long count)
{
    memset(ds, 0, sizeof *ds);
    ds->count = count;
    ds->rows = 1;
    ds->cols = ds->features = features;
    ds->classes = classes;
    ds->label_width = label_width;
}

// model.type = type with the overrides, one backward pass of `rows` random
// rows told to a recorder; returns the tells, checked against the final
// gradient.
static int tells_of_(const char *const *sets, int n_sets, int rows)
{
    struct train_config cfg;
    char err[256];
    train_config_defaults(&cfg);
    for (int i = 0; i < n_sets; i++)
        assert_int_equal(train_config_apply_override(&cfg, NULL, sets[i], err, sizeof err), 0);
    const int gpt = cfg.model.type == MODEL_GPT;
    struct dataset train;
    if (gpt)
        fill_(&train, cfg.model.context, 256, cfg.model.context, 64), train.tokens = 1;
    else
        fill_(&train, 20, 5, 1, 64);
    vgpu_t *dev = test_rank_room(48u << 20);
    struct model m = {0};
    assert_int_equal(model_init(&m, dev, &cfg, &train, rows), 0);
    // Parameters, input and labels, drawn.
    float *params = malloc(m.param_count * sizeof *params);
    assert_non_null(params);
    model_init_params(&m, params, 7);
    assert_int_equal(vgpu_memcpy_htod(dev, m.params, params, m.param_count * sizeof *params), 0);
    const size_t width = (size_t)m.batch.input_width * (size_t)rows;
    const size_t labels = (size_t)m.batch.labels_per_row * (size_t)rows;
    uint64_t rng = 11;
    int32_t *ints = malloc((width > labels ? width : labels) * sizeof *ints);
    float *vals = malloc(width * sizeof *vals);
    assert_true(ints && vals);
    if (gpt) {
        for (size_t i = 0; i < width; i++)
            ints[i] = (int32_t)(next_(&rng) % 256);
        assert_int_equal(vgpu_memcpy_htod(dev, m.input, ints, width * sizeof *ints), 0);
    } else {
        for (size_t i = 0; i < width; i++)
            vals[i] = (float)(next_(&rng) % 1000) / 500.0f - 1.0f;
        assert_int_equal(vgpu_memcpy_htod(dev, m.input, vals, width * sizeof *vals), 0);
    }
    for (size_t i = 0; i < labels; i++)
        ints[i] = (int32_t)(next_(&rng) % (uint32_t)train.classes);
    assert_int_equal(vgpu_memcpy_htod(dev, m.labels, ints, labels * sizeof *ints), 0);

    struct recorder rec = {.dev = dev, .m = &m};
    const struct grads_ready hook = {record_, &rec};
    assert_int_equal(model_forward(&m, dev, rows), 0);
    assert_int_equal(model_backward_telling(&m, dev, rows, 1.0f / (float)rows, &hook), 0);
    float *final = malloc(m.param_count * sizeof *final);
    assert_non_null(final);
    assert_int_equal(vgpu_memcpy_dtoh(dev, final, m.grads, m.param_count * sizeof *final), 0);
    // The promise: descending, ending at 0, each tail final when told.
    assert_true(rec.n >= 1);
    assert_int_equal(rec.from[rec.n - 1], 0);
    for (int k = 0; k < rec.n; k++) {
        if (k)
            assert_true(rec.from[k] < rec.from[k - 1]);
        assert_true(rec.from[k] < m.param_count);
        assert_memory_equal(rec.tail[k], final + rec.from[k],
                            (m.param_count - rec.from[k]) * sizeof *final);
        free(rec.tail[k]);
    }
    // The gradient is not all zeros (a pass that told before writing would
    // compare zeros with zeros).
    int nonzero = 0;
    for (size_t i = 0; i < m.param_count; i++)
        nonzero += final[i] != 0.0f;
    assert_true(nonzero > (int)(m.param_count / 2));
    free(final);
    free(ints);
    free(vals);
    free(params);
    model_free(&m, dev);
    assert_int_equal(test_rank_in_use(), 0); // the model left nothing behind
    test_rank_release_room();
    return rec.n;
}

static void test_mlp_tells(void **state)
{
    (void)state;
    static const char *const sets[] = {"model.type=mlp", "model.hidden=16,12"};
    assert_int_equal(tells_of_(sets, 2, 6), 3); // a tell a layer
}

static void test_gpt_tells(void **state)
{
    (void)state;
    static const char *const sets[] = {"model.type=gpt", "model.layers=3", "model.heads=2",
                                       "model.channels=16", "model.context=8"};
    // After the final LayerNorm, after each block, and after the embeddings.
    assert_int_equal(tells_of_(sets, 5, 3), 3 + 2);
}

// ---- the thread ----

static struct vgpu_comm_stats stats_(vgpu_t *v)
{
    struct vgpu_comm_stats s;
    assert_int_equal(vgpu_get_comm_stats(v, &s), 0);
    return s;
}

// Waits (up to 10 s) for the calls since `base` to reach `want`, then a
// while longer to see that no more follow; they carried `bytes` in all (each
// bucket its own range: 4 bytes a float).
static void expect_calls_(vgpu_t *v, struct vgpu_comm_stats base, uint64_t want, uint64_t bytes)
{
    for (int i = 0; i < 10000 && stats_(v).calls - base.calls < want; i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    nanosleep(&(struct timespec){0, 50000000}, NULL);
    assert_int_equal(stats_(v).calls - base.calls, want);
    assert_int_equal(stats_(v).bytes - base.bytes, bytes);
}

static void test_thread_issues_told_buckets(void **state)
{
    (void)state;
    vgpu_t *v = test_rank_room(1u << 20);
    const size_t count = 5 * 64 + 10; // buckets [0,64) ... [256,320), [320,330)
    float *grads;
    assert_int_equal(vgpu_malloc(v, (void **)&grads, count * sizeof(float)), 0);
    struct grad_buckets *b;
    assert_int_equal(grad_buckets_open(&b, v, grads, count, 64), 0);
    assert_int_equal(grad_buckets_n(b), 6);
    for (int step = 0; step < 2; step++) { // a second step starts over
        const struct vgpu_comm_stats base = stats_(v);
        const struct grads_ready *ready = grad_buckets_begin(b);
        expect_calls_(v, base, 0, 0);           // nothing final yet
        grads_ready_tell(ready, 321);           // inside the top bucket: not final
        expect_calls_(v, base, 0, 0);
        grads_ready_tell(ready, 320);           // the top bucket: 10 floats
        expect_calls_(v, base, 1, 40);
        grads_ready_tell(ready, 193);           // [256, 320) final; [192, 256) not
        expect_calls_(v, base, 2, 40 + 256);
        grads_ready_tell(ready, 192);
        expect_calls_(v, base, 3, 40 + 512);
        double waited = -1;
        assert_int_equal(grad_buckets_finish(b, &waited), 0); // the rest: 3 more
        assert_int_equal(stats_(v).calls - base.calls, 6);
        assert_int_equal(stats_(v).bytes - base.bytes, count * sizeof(float));
        assert_true(waited >= 0 && waited < 5);
    }
    // A pass that fails before telling anything: finish still issues every
    // bucket (the peers' passes did not fail, and wait for them).
    const struct vgpu_comm_stats base = stats_(v);
    grad_buckets_begin(b);
    double waited;
    assert_int_equal(grad_buckets_finish(b, &waited), 0);
    assert_int_equal(stats_(v).calls - base.calls, 6);
    grad_buckets_close(b);
    vgpu_free(v, grads);
    test_rank_release_room();
}

// A collective that fails (here: the gradient is host memory, which the
// device refuses): finish returns its status and issues no bucket after it.
static void test_thread_failure(void **state)
{
    (void)state;
    vgpu_t *v = test_rank_room(1u << 20);
    static float host[3 * 64];
    struct grad_buckets *b;
    assert_int_equal(grad_buckets_open(&b, v, host, 3 * 64, 64), 0);
    const struct vgpu_comm_stats base = stats_(v);
    grad_buckets_begin(b);
    double waited;
    assert_int_equal(grad_buckets_finish(b, &waited), VGPU_EINVAL);
    assert_true(stats_(v).calls - base.calls <= 1); // at most the one that failed
    grad_buckets_close(b);
    test_rank_release_room();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut),
        cmocka_unit_test(test_mlp_tells),
        cmocka_unit_test(test_gpt_tells),
        cmocka_unit_test(test_thread_issues_told_buckets),
        cmocka_unit_test(test_thread_failure),
    };
    return cmocka_run_group_tests(tests, NULL, test_rank_group_teardown);
}
