// test_mlp.c: the MLP against a double-precision host reference: forward
// logits, per-row loss, and every parameter's gradient against central finite
// differences; accumulation; layout and memory accounting; He initialisation.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "log.h"
#include "models/mlp/mlp.h"
#include "optim.h"
#include "status.h"
#include "test_rank.h"
#include "test_util.h"

// Sets one key through the config parser, as a config file would.
static void set_key_(struct train_config *cfg, const char *key, const char *value)
{
    char assignment[128], err[256];
    snprintf(assignment, sizeof assignment, "%s=%s", key, value);
    if (train_config_apply_override(cfg, NULL, assignment, err, sizeof err) != 0)
        fail_msg("%s", err);
}

#define CAP_BYTES (8u << 20)

// The test's rank with cap_bytes of room (test_rank.h); close_ gives it back.
static vgpu_t *open_cpu_(uint64_t cap_bytes) { return test_rank_room((size_t)cap_bytes); }

static void close_(vgpu_t *dev)
{
    (void)dev;
    test_rank_release_room();
}

// ---- the reference ----

// Forward pass in double with the same layout as the model: layer l's weight
// is [dims[l], dims[l+1]] row-major at w_offset[l], its bias at b_offset[l],
// ReLU between layers. Writes logits [rows, classes] (if not NULL), per-row
// losses (if not NULL), and the smallest |pre-activation| of any hidden unit
// (to keep finite differences away from ReLU kinks). Returns
// grad_scale * sum over rows of the cross-entropy.
static double ref_forward_(const struct mlp *m, const double *p, const double *x, const int32_t *y,
                           int rows, double grad_scale, double *logits, double *row_loss,
                           double *min_abs_pre)
{
    int widest = 0;
    for (int i = 0; i < m->n_dims; i++)
        widest = m->dims[i] > widest ? m->dims[i] : widest;
    double *a = malloc(sizeof(double) * widest), *b = malloc(sizeof(double) * widest);
    double total = 0, min_pre = INFINITY;
    for (int r = 0; r < rows; r++) {
        memcpy(a, x + (size_t)r * m->dims[0], sizeof(double) * m->dims[0]);
        for (int l = 0; l < m->n_layers; l++) {
            int in = m->dims[l], out = m->dims[l + 1];
            const double *w = p + m->w_offset[l], *bias = p + m->b_offset[l];
            for (int j = 0; j < out; j++) {
                double s = bias[j];
                for (int i = 0; i < in; i++)
                    s += a[i] * w[(size_t)i * out + j];
                if (l + 1 < m->n_layers) {
                    min_pre = fabs(s) < min_pre ? fabs(s) : min_pre;
                    s = s > 0 ? s : 0;
                }
                b[j] = s;
            }
            double *t = a;
            a = b;
            b = t;
        }
        int classes = m->dims[m->n_dims - 1];
        double zmax = a[0];
        for (int j = 1; j < classes; j++)
            zmax = a[j] > zmax ? a[j] : zmax;
        double sum = 0;
        for (int j = 0; j < classes; j++)
            sum += exp(a[j] - zmax);
        double ce = zmax + log(sum) - a[y[r]];
        if (logits)
            memcpy(logits + (size_t)r * classes, a, sizeof(double) * classes);
        if (row_loss)
            row_loss[r] = ce;
        total += ce;
    }
    free(a);
    free(b);
    if (min_abs_pre)
        *min_abs_pre = min_pre;
    return grad_scale * total;
}

// ---- fixture: a small model with seeded parameters and a batch on device ----

static const int DIMS[] = {7, 5, 4, 3};
#define ROWS 6
#define SEED 1234

struct fixture {
    vgpu_t *dev;
    struct mlp m;
    float *params;  // host copy, [param_count]
    double *x;      // [ROWS, dims[0]]
    int32_t y[ROWS];
};

static int setup_model(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->dev = open_cpu_(CAP_BYTES);
    if (mlp_init(&f->m, f->dev, DIMS, 4, ROWS))
        return -1;
    f->params = malloc(f->m.param_count * sizeof(float));
    mlp_init_params_host(&f->m, f->params, SEED);
    // Non-zero biases, so that their path through the model is exercised.
    uint64_t s = 99;
    for (int l = 0; l < f->m.n_layers; l++)
        for (int j = 0; j < DIMS[l + 1]; j++)
            f->params[f->m.b_offset[l] + j] = (float)test_rand_uniform(&s, -0.3, 0.3);
    float xf[ROWS * 7];
    test_fill_uniform(xf, ROWS * 7, &s, -1, 1);
    f->x = malloc(sizeof xf / sizeof xf[0] * sizeof(double));
    for (int i = 0; i < ROWS * 7; i++)
        f->x[i] = xf[i];
    for (int r = 0; r < ROWS; r++)
        f->y[r] = (int32_t)(test_rand_u64(&s) % 3);
    if (vgpu_memcpy_htod(f->dev, f->m.params, f->params, f->m.param_count * sizeof(float)) ||
        vgpu_memcpy_htod(f->dev, f->m.acts[0], xf, sizeof xf) ||
        vgpu_memcpy_htod(f->dev, f->m.labels, f->y, sizeof f->y))
        return -1;
    *state = f;
    return 0;
}

static int teardown_model(void **state)
{
    struct fixture *f = *state;
    mlp_free(&f->m, f->dev);
    close_(f->dev);
    free(f->params);
    free(f->x);
    free(f);
    return 0;
}

static double *params_double_(const struct fixture *f)
{
    double *p = calloc(f->m.param_count, sizeof *p);
    for (size_t i = 0; i < f->m.param_count; i++)
        p[i] = f->params[i];
    return p;
}

static void test_layout(void **state)
{
    (void)state;
    struct mlp m;
    assert_int_equal(mlp_layout(&m, DIMS, 4, 10), 0);
    assert_int_equal(m.n_layers, 3);
    // [7,5] w, [5] b, [5,4] w, [4] b, [4,3] w, [3] b
    assert_int_equal(m.w_offset[0], 0);
    assert_int_equal(m.b_offset[0], 35);
    assert_int_equal(m.w_offset[1], 40);
    assert_int_equal(m.b_offset[1], 60);
    assert_int_equal(m.w_offset[2], 64);
    assert_int_equal(m.b_offset[2], 76);
    assert_int_equal(m.param_count, 79);
    static const int zero_dim[] = {7, 0, 3};
    static const int many[MLP_MAX_DIMS + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                               1, 1, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(mlp_layout(&m, DIMS, 1, 10), VGPU_EINVAL);
    assert_int_equal(mlp_layout(&m, zero_dim, 3, 10), VGPU_EINVAL);
    assert_int_equal(mlp_layout(&m, DIMS, 4, 0), VGPU_EINVAL);
    assert_int_equal(mlp_layout(&m, many, MLP_MAX_DIMS + 1, 10), VGPU_EINVAL);
    assert_int_equal(mlp_layout(&m, many, MLP_MAX_DIMS, 10), 0);
}

// Forward logits and per-row losses match the double reference.
static void test_forward_matches_reference(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(mlp_forward(&f->m, f->dev, ROWS), 0);
    float logits[ROWS * 3];
    assert_int_equal(vgpu_memcpy_dtoh(f->dev, logits, f->m.acts[3], sizeof logits), 0);
    double *p = params_double_(f);
    double want[ROWS * 3], want_loss[ROWS];
    ref_forward_(&f->m, p, f->x, f->y, ROWS, 1.0, want, want_loss, NULL);
    assert_allclose(logits, want, ROWS * 3, 1e-6, 1e-5);

    // Evaluation stats: loss, top-1, top-5 (3 classes: always in the top 5).
    assert_int_equal(mlp_eval_stats(&f->m, f->dev, ROWS), 0);
    float st[ROWS * XENT_STATS];
    assert_int_equal(vgpu_memcpy_dtoh(f->dev, st, f->m.stats, sizeof st), 0);
    double want_st[ROWS * XENT_STATS];
    for (int r = 0; r < ROWS; r++) {
        int argmax = 0;
        for (int j = 1; j < 3; j++)
            argmax = want[r * 3 + j] > want[r * 3 + argmax] ? j : argmax;
        want_st[r * 3 + 0] = want_loss[r];
        want_st[r * 3 + 1] = argmax == f->y[r];
        want_st[r * 3 + 2] = 1;
    }
    assert_allclose(st, want_st, ROWS * XENT_STATS, 1e-5, 1e-5);

    // Fewer rows than max_rows is fine; more is refused.
    assert_int_equal(mlp_forward(&f->m, f->dev, 2), 0);
    assert_int_equal(mlp_forward(&f->m, f->dev, ROWS + 1), VGPU_EINVAL);
    assert_int_equal(mlp_forward(&f->m, f->dev, -1), VGPU_EINVAL);
    free(p);
}

// Every parameter's gradient against central differences of the double
// reference loss: grad_scale * sum over rows of cross-entropy.
static void test_gradient_check(void **state)
{
    struct fixture *f = *state;
    const double grad_scale = 0.37; // not 1/ROWS: catches a hidden mean
    const double h = 1e-6;
    size_t n = f->m.param_count;
    double *p = params_double_(f);
    double min_pre;
    ref_forward_(&f->m, p, f->x, f->y, ROWS, grad_scale, NULL, NULL, &min_pre);
    // Perturbing one parameter by h moves a pre-activation by at most ~h * 10:
    // far from a ReLU kink, the loss is smooth there.
    assert_true(min_pre > 1e-3);

    double *fd = calloc(n, sizeof *fd);
    for (size_t i = 0; i < n; i++) {
        double keep = p[i];
        p[i] = keep + h;
        double up = ref_forward_(&f->m, p, f->x, f->y, ROWS, grad_scale, NULL, NULL, NULL);
        p[i] = keep - h;
        double down = ref_forward_(&f->m, p, f->x, f->y, ROWS, grad_scale, NULL, NULL, NULL);
        p[i] = keep;
        fd[i] = (up - down) / (2 * h);
    }

    assert_int_equal(mlp_forward(&f->m, f->dev, ROWS), 0);
    assert_int_equal(mlp_backward(&f->m, f->dev, ROWS, (float)grad_scale), 0);
    float *g = malloc(n * sizeof *g);
    assert_int_equal(vgpu_memcpy_dtoh(f->dev, g, f->m.grads, n * sizeof *g), 0);

    // Per tensor, so that a failure names the layer.
    for (int l = 0; l < f->m.n_layers; l++) {
        size_t nw = (size_t)DIMS[l] * DIMS[l + 1], nb = (size_t)DIMS[l + 1];
        fprintf(stderr, "  layer %d: weight [%d,%d], bias [%d]\n", l, DIMS[l], DIMS[l + 1],
                DIMS[l + 1]);
        assert_allclose(g + f->m.w_offset[l], fd + f->m.w_offset[l], nw, 1e-6, 1e-4);
        assert_allclose(g + f->m.b_offset[l], fd + f->m.b_offset[l], nb, 1e-6, 1e-4);
        // Not vacuous: each tensor has a gradient of real size.
        double norm = 0;
        for (size_t i = 0; i < nw; i++)
            norm += fd[f->m.w_offset[l] + i] * fd[f->m.w_offset[l] + i];
        assert_true(norm > 1e-6);
    }

    // The per-row losses in stats are the unscaled cross-entropies.
    float st[ROWS * XENT_STATS];
    double want_loss[ROWS];
    ref_forward_(&f->m, p, f->x, f->y, ROWS, 1.0, NULL, want_loss, NULL);
    assert_int_equal(vgpu_memcpy_dtoh(f->dev, st, f->m.stats, sizeof st), 0);
    for (int r = 0; r < ROWS; r++)
        assert_true(fabs(st[r * 3] - want_loss[r]) <= 1e-5 * (1 + want_loss[r]));
    free(g);
    free(fd);
    free(p);
}

// mlp_backward overwrites grads: whatever they held before, a second call
// gives the same bits, zero rows give zeros, and grad_scale scales linearly.
static void test_backward_overwrites(void **state)
{
    struct fixture *f = *state;
    size_t n = f->m.param_count;
    float *g1 = malloc(n * 4), *g2 = malloc(n * 4), *g3 = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        g3[i] = 10.0f;
    assert_int_equal(vgpu_memcpy_htod(f->dev, f->m.grads, g3, n * 4), 0);
    assert_int_equal(mlp_forward(&f->m, f->dev, ROWS), 0);
    assert_int_equal(mlp_backward(&f->m, f->dev, ROWS, 0.5f), 0);
    assert_int_equal(vgpu_memcpy_dtoh(f->dev, g1, f->m.grads, n * 4), 0);
    assert_int_equal(mlp_backward(&f->m, f->dev, ROWS, 0.5f), 0);
    assert_int_equal(vgpu_memcpy_dtoh(f->dev, g2, f->m.grads, n * 4), 0);
    assert_memory_equal(g1, g2, n * 4);
    double norm = 0; // not vacuous: a real gradient, not the 10s left in place
    for (size_t i = 0; i < n; i++)
        norm += fabs((double)g1[i] - 10.0);
    assert_true(norm > 1.0);

    // grad_scale scales linearly.
    double *want = calloc(n, sizeof *want);
    assert_int_equal(mlp_backward(&f->m, f->dev, ROWS, 1.5f), 0);
    assert_int_equal(vgpu_memcpy_dtoh(f->dev, g3, f->m.grads, n * 4), 0);
    for (size_t i = 0; i < n; i++)
        want[i] = 3.0 * g1[i];
    assert_allclose(g3, want, n, 2e-6, 1e-5); // float rounding differs between the scales

    // Evaluation does not touch the gradients.
    assert_int_equal(mlp_eval_stats(&f->m, f->dev, ROWS), 0);
    assert_int_equal(vgpu_memcpy_dtoh(f->dev, g2, f->m.grads, n * 4), 0);
    assert_memory_equal(g2, g3, n * 4);

    // No rows: a zero gradient.
    assert_int_equal(mlp_backward(&f->m, f->dev, 0, 0.5f), 0);
    assert_int_equal(vgpu_memcpy_dtoh(f->dev, g2, f->m.grads, n * 4), 0);
    for (size_t i = 0; i < n; i++)
        assert_true(g2[i] == 0.0f);
    free(want), free(g1), free(g2), free(g3);
}

// A batch split in two gives the same summed gradient as the whole batch
// (what data parallelism relies on), up to float rounding.
static void test_split_batch_sums(void **state)
{
    struct fixture *f = *state;
    size_t n = f->m.param_count;
    float *whole = malloc(n * 4), *part = malloc(n * 4);
    assert_int_equal(mlp_forward(&f->m, f->dev, ROWS), 0);
    assert_int_equal(mlp_backward(&f->m, f->dev, ROWS, 1.0f / ROWS), 0);
    assert_int_equal(vgpu_memcpy_dtoh(f->dev, whole, f->m.grads, n * 4), 0);

    float xf[ROWS * 7];
    assert_int_equal(vgpu_memcpy_dtoh(f->dev, xf, f->m.acts[0], sizeof xf), 0);
    const int first = 4;
    double *sum = calloc(n, sizeof *sum);
    // First part: rows 0..3 are already at the start of acts[0] and labels.
    assert_int_equal(mlp_forward(&f->m, f->dev, first), 0);
    assert_int_equal(mlp_backward(&f->m, f->dev, first, 1.0f / ROWS), 0);
    assert_int_equal(vgpu_memcpy_dtoh(f->dev, part, f->m.grads, n * 4), 0);
    for (size_t i = 0; i < n; i++)
        sum[i] += part[i];
    // Second part: move rows 4..5 to the front.
    assert_int_equal(vgpu_memcpy_htod(f->dev, f->m.acts[0], xf + first * 7,
                                      (ROWS - first) * 7 * sizeof(float)),
                0);
    assert_int_equal(vgpu_memcpy_htod(f->dev, f->m.labels, f->y + first,
                                      (ROWS - first) * sizeof(int32_t)),
                0);
    assert_int_equal(mlp_forward(&f->m, f->dev, ROWS - first), 0);
    assert_int_equal(mlp_backward(&f->m, f->dev, ROWS - first, 1.0f / ROWS), 0);
    assert_int_equal(vgpu_memcpy_dtoh(f->dev, part, f->m.grads, n * 4), 0);
    for (size_t i = 0; i < n; i++)
        sum[i] += part[i];
    assert_allclose(whole, sum, n, 1e-6, 1e-5);
    free(sum), free(whole), free(part);
}

// He-normal initialisation: std sqrt(2 / fan_in), zero biases, a pure
// function of the seed.
static void test_init_params_host(void **state)
{
    (void)state;
    static const int dims[] = {400, 300, 10};
    struct mlp m;
    assert_int_equal(mlp_layout(&m, dims, 3, 1), 0);
    float *a = malloc(m.param_count * 4), *b = malloc(m.param_count * 4),
          *c = malloc(m.param_count * 4);
    memset(a, 0x7f, m.param_count * 4); // garbage that must be overwritten
    mlp_init_params_host(&m, a, 42);
    mlp_init_params_host(&m, b, 42);
    mlp_init_params_host(&m, c, 43);
    assert_memory_equal(a, b, m.param_count * 4);
    size_t same = 0;
    for (size_t i = 0; i < m.param_count; i++)
        same += a[i] == c[i];
    // Only the zero biases agree between seeds.
    assert_int_equal(same, 300 + 10);
    for (int l = 0; l < m.n_layers; l++) {
        size_t nw = (size_t)dims[l] * dims[l + 1];
        double sum = 0, sq = 0;
        for (size_t i = 0; i < nw; i++) {
            double w = a[m.w_offset[l] + i];
            assert_true(isfinite(w));
            sum += w;
            sq += w * w;
        }
        double mean = sum / nw, std = sqrt(sq / nw - mean * mean);
        double want = sqrt(2.0 / dims[l]);
        fprintf(stderr, "  layer %d: mean %.4g std %.4g (want %.4g)\n", l, mean, std, want);
        // n = 120000 and 3000 samples: the sample std is within a few percent.
        assert_true(fabs(std / want - 1) < (nw > 10000 ? 0.02 : 0.06));
        assert_true(fabs(mean) < 4 * want / sqrt((double)nw));
        for (int j = 0; j < dims[l + 1]; j++)
            assert_true(a[m.b_offset[l] + j] == 0.0f);
    }
    free(a), free(b), free(c);
}

// mlp_device_bytes bounds what mlp_init (plus the optimizer state) takes.
static void test_device_bytes(void **state)
{
    (void)state;
    static const int dims[] = {13, 33, 7, 5};
    const int rows = 9;
    struct mlp layout;
    assert_int_equal(mlp_layout(&layout, dims, 4, rows), 0);
    static const char *opts[] = {"sgd", "adam", "adamw"};
    for (size_t o = 0; o < TEST_ARRAY_LEN(opts); o++) {
        struct train_config cfg;
        train_config_defaults(&cfg);
        set_key_(&cfg, "train.optimizer", opts[o]);
        uint64_t need = mlp_device_bytes(&layout, optim_state_per_param(cfg.train.optimizer));
        vgpu_t *dev = open_cpu_(need);
        struct mlp m;
        struct optimizer opt;
        assert_int_equal(mlp_init(&m, dev, dims, 4, rows), 0);
        assert_int_equal(optim_init(&opt, dev, &cfg, m.param_count), 0);
        uint64_t used = test_rank_in_use();
        fprintf(stderr, "  %s: used %llu of estimated %llu\n", opts[o], (unsigned long long)used,
                (unsigned long long)need);
        assert_true(used <= need);
        optim_free(&opt, dev);
        mlp_free(&m, dev);
        assert_int_equal(test_rank_in_use(), 0); // everything returned
        close_(dev);
    }
    // A cap well below the need fails with VGPU_EDEVMEM, not a crash.
    uint64_t need = mlp_device_bytes(&layout, 0);
    vgpu_t *dev = open_cpu_(need / 2);
    struct mlp m;
    fprintf(stderr, "  (an expected 'device memory cap exceeded' message follows)\n");
    assert_int_equal(mlp_init(&m, dev, dims, 4, rows), VGPU_EDEVMEM);
    mlp_free(&m, dev);
    assert_int_equal(test_rank_in_use(), 0);
    close_(dev);
}

int main(void)
{
    log_set_trace(0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test_setup_teardown(test_forward_matches_reference, setup_model, teardown_model),
        cmocka_unit_test_setup_teardown(test_gradient_check, setup_model, teardown_model),
        cmocka_unit_test_setup_teardown(test_backward_overwrites, setup_model, teardown_model),
        cmocka_unit_test_setup_teardown(test_split_batch_sums, setup_model, teardown_model),
        cmocka_unit_test(test_init_params_host),
        cmocka_unit_test(test_device_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, test_rank_group_teardown);
}
