// test_optim.c: learning-rate schedules (values worked out by hand) and the
// SGD / Adam / AdamW updates on a device buffer against a host reference.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "train_config.h"
#include "job.h"
#include "log.h"
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

// ---- schedules ----

struct lr_case {
    const char *schedule;
    double lr;
    long warmup, step_every;
    double gamma;
    long step, total;
    double want;
};

static void test_lr_schedules(void **state)
{
    (void)state;
    static const struct lr_case cases[] = {
        // constant
        {"constant", 0.1, 0, 1000, 0.1, 0, 100, 0.1},
        {"constant", 0.1, 0, 1000, 0.1, 99, 100, 0.1},
        {"constant", 0.1, 0, 1000, 0.1, 500, 100, 0.1}, // past the end
        // linear warm-up from lr/warm to lr, then the schedule
        {"constant", 0.1, 4, 1000, 0.1, 0, 100, 0.025},
        {"constant", 0.1, 4, 1000, 0.1, 1, 100, 0.05},
        {"constant", 0.1, 4, 1000, 0.1, 2, 100, 0.075},
        {"constant", 0.1, 4, 1000, 0.1, 3, 100, 0.1},
        {"constant", 0.1, 4, 1000, 0.1, 4, 100, 0.1},
        {"constant", 0.2, 1, 1000, 0.1, 0, 100, 0.2},
        // step: x gamma every step_every steps
        {"step", 0.1, 0, 10, 0.5, 0, 100, 0.1},
        {"step", 0.1, 0, 10, 0.5, 9, 100, 0.1},
        {"step", 0.1, 0, 10, 0.5, 10, 100, 0.05},
        {"step", 0.1, 0, 10, 0.5, 19, 100, 0.05},
        {"step", 0.1, 0, 10, 0.5, 25, 100, 0.025},
        {"step", 1.0, 0, 1, 0.1, 3, 100, 1e-3},
        // step after warm-up: decay counts from the end of warm-up
        {"step", 0.1, 5, 10, 0.5, 2, 100, 0.06},
        {"step", 0.1, 5, 10, 0.5, 5, 100, 0.1},
        {"step", 0.1, 5, 10, 0.5, 14, 100, 0.1},
        {"step", 0.1, 5, 10, 0.5, 15, 100, 0.05},
        // cosine from lr to 0 over the steps after warm-up
        {"cosine", 0.1, 0, 1000, 0.1, 0, 100, 0.1},
        {"cosine", 0.1, 0, 1000, 0.1, 50, 100, 0.05},
        {"cosine", 0.1, 0, 1000, 0.1, 25, 100, 0.1 * (0.5 + 0.5 * 0.70710678118654752)},
        {"cosine", 0.1, 0, 1000, 0.1, 100, 100, 0.0},
        {"cosine", 0.1, 0, 1000, 0.1, 1000, 100, 0.0}, // clamped past the end
        {"cosine", 0.1, 10, 1000, 0.1, 9, 110, 0.1},    // end of warm-up
        {"cosine", 0.1, 10, 1000, 0.1, 10, 110, 0.1},   // start of decay
        {"cosine", 0.1, 10, 1000, 0.1, 60, 110, 0.05},  // middle of decay
        {"cosine", 0.1, 10, 1000, 0.1, 110, 110, 0.0},
        {"cosine", 0.1, 10, 1000, 0.1, 5, 8, 0.06},     // warm-up longer than the run
        {"cosine", 0.1, 10, 1000, 0.1, 12, 8, 0.1},     // then no decay span: lr
    };
    for (size_t i = 0; i < TEST_ARRAY_LEN(cases); i++) {
        const struct lr_case *c = &cases[i];
        struct train_config cfg;
        train_config_defaults(&cfg);
        set_key_(&cfg, "train.schedule", c->schedule);
        cfg.train.lr = c->lr;
        cfg.train.warmup_steps = c->warmup;
        cfg.train.step_every = c->step_every;
        cfg.train.step_gamma = c->gamma;
        double got = optim_lr_at(&cfg, c->step, c->total);
        if (!(fabs(got - c->want) <= 1e-12 + 1e-9 * fabs(c->want)))
            fail_msg("%s lr=%g warmup=%ld every=%ld gamma=%g: step %ld of %ld: got %.12g, want %.12g",
                     c->schedule, c->lr, c->warmup, c->step_every, c->gamma, c->step, c->total, got,
                     c->want);
    }
}

// Cosine: the end of the run is close to 0, and the rate never rises after
// the warm-up; warm-up rises strictly.
static void test_lr_shapes(void **state)
{
    (void)state;
    struct train_config cfg;
    train_config_defaults(&cfg);
    set_key_(&cfg, "train.schedule", "cosine");
    cfg.train.lr = 0.3;
    cfg.train.warmup_steps = 20;
    const long total = 500;
    double prev = 0;
    for (long s = 0; s < total; s++) {
        double lr = optim_lr_at(&cfg, s, total);
        assert_true(lr > 0 && lr <= 0.3 + 1e-15);
        if (s < 20)
            assert_true(lr > prev);
        else
            assert_true(lr <= prev);
        prev = lr;
    }
    assert_true(prev < 0.3 * 1e-4); // last step: ~0
}

// ---- optimizer steps ----

#define N 37
#define STEPS 3

struct fixture {
    vgpu_t *dev;
    float *params, *grads; // device, [N]
    struct optimizer opt;  // freed by the teardown even when a check fails (the
                           // next setup's test_rank_room needs an empty device)
};

static int setup_dev(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->dev = test_rank_room(1 << 20);
    if (job_alloc_floats(f->dev, N, &f->params) || job_alloc_floats(f->dev, N, &f->grads))
        return -1;
    *state = f;
    return 0;
}

static int teardown_dev(void **state)
{
    struct fixture *f = *state;
    optim_free(&f->opt, f->dev);
    vgpu_free(f->dev, f->params);
    vgpu_free(f->dev, f->grads);
    test_rank_release_room();
    free(f);
    return 0;
}

static void test_state_sizes(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(optim_state_per_param(OPTIM_SGD), 1);
    assert_int_equal(optim_state_per_param(OPTIM_ADAM), 2);
    assert_int_equal(optim_state_per_param(OPTIM_ADAMW), 2);
    struct train_config cfg;
    train_config_defaults(&cfg);
    static const struct {
        const char *name;
        enum optim_kind kind;
        size_t per;
    } kinds[] = {{"sgd", OPTIM_SGD, 1}, {"adam", OPTIM_ADAM, 2}, {"adamw", OPTIM_ADAMW, 2}};
    for (size_t k = 0; k < TEST_ARRAY_LEN(kinds); k++) {
        set_key_(&cfg, "train.optimizer", kinds[k].name);
        struct optimizer o;
        assert_int_equal(optim_init(&o, f->dev, &cfg, N), 0);
        assert_int_equal(o.kind, kinds[k].kind);
        assert_int_equal(o.n, N);
        assert_int_equal(o.state_count, kinds[k].per * N);
        assert_int_equal(o.t, 0);
        float st[2 * N];
        assert_int_equal(vgpu_memcpy_dtoh(f->dev, st, o.state, o.state_count * 4), 0);
        for (size_t i = 0; i < o.state_count; i++)
            assert_true(st[i] == 0.0f);
        optim_free(&o, f->dev);
        assert_null(o.state);
        optim_free(&o, f->dev); // twice is harmless
    }
    optim_free(NULL, f->dev);
    cfg.train.optimizer = (enum optim_kind)42; // not an optimizer
    struct optimizer o;
    assert_int_equal(optim_init(&o, f->dev, &cfg, N), VGPU_EINVAL);
    // Everything was given back: only the fixture's two arrays are in use.
    const size_t array = (N * sizeof(float) + VGPU_MALLOC_ALIGN - 1) / VGPU_MALLOC_ALIGN *
                         VGPU_MALLOC_ALIGN;
    assert_int_equal(test_rank_in_use(), 2 * array);
}

struct step_case {
    const char *optimizer;
    double momentum, weight_decay;
    double beta2; // 0: 0.95
};

static void test_steps_vs_reference(void **state)
{
    struct fixture *f = *state;
    static const struct step_case cases[] = {
        {"sgd", 0.0, 0.0, 0},   {"sgd", 0.9, 0.0, 0},  {"sgd", 0.9, 0.05, 0},
        {"adam", 0.0, 0.0, 0},  {"adam", 0.0, 0.1, 0}, {"adamw", 0.0, 0.0, 0},
        {"adamw", 0.0, 0.1, 0},
        // The largest beta2 the config takes (the config refuses values
        // whose float is 1, which would leave v at 0 and divide by 0).
        {"adam", 0.0, 0.0, 0.9999999},
    };
    static const float lrs[STEPS] = {0.1f, 0.05f, 0.02f}; // as a schedule would give
    uint64_t seed = 77;
    for (size_t c = 0; c < TEST_ARRAY_LEN(cases); c++) {
        struct train_config cfg;
        train_config_defaults(&cfg);
        set_key_(&cfg, "train.optimizer", cases[c].optimizer);
        cfg.train.momentum = cases[c].momentum;
        cfg.train.weight_decay = cases[c].weight_decay;
        cfg.train.beta1 = 0.8;
        cfg.train.beta2 = cases[c].beta2 ? cases[c].beta2 : 0.95;
        cfg.train.eps = 1e-6;
        struct optimizer o;
        assert_int_equal(optim_init(&o, f->dev, &cfg, N), 0);

        float p[N], g[N];
        double rp[N], m[N] = {0}, v[N] = {0};
        test_fill_uniform(p, N, &seed, -1, 1);
        for (int i = 0; i < N; i++)
            rp[i] = p[i];
        assert_int_equal(vgpu_memcpy_htod(f->dev, f->params, p, sizeof p), 0);
        // Hyper-parameters as the device sees them (floats).
        const double mu = (float)cfg.train.momentum, wd = (float)cfg.train.weight_decay,
                     b1 = (float)cfg.train.beta1, b2 = (float)cfg.train.beta2,
                     eps = (float)cfg.train.eps;
        int is_sgd = !strcmp(cases[c].optimizer, "sgd"), is_w = !strcmp(cases[c].optimizer, "adamw");
        for (int t = 1; t <= STEPS; t++) {
            test_fill_uniform(g, N, &seed, -1, 1);
            assert_int_equal(vgpu_memcpy_htod(f->dev, f->grads, g, sizeof g), 0);
            double lr = lrs[t - 1];
            for (int i = 0; i < N; i++) {
                if (is_sgd) {
                    double gi = g[i] + wd * rp[i];
                    m[i] = mu * m[i] + gi; // velocity
                    rp[i] -= lr * m[i];
                    continue;
                }
                double gi = g[i] + (is_w ? 0.0 : wd * rp[i]);
                m[i] = b1 * m[i] + (1 - b1) * gi;
                v[i] = b2 * v[i] + (1 - b2) * gi * gi;
                double mhat = m[i] / (1 - pow(b1, t)), vhat = v[i] / (1 - pow(b2, t));
                rp[i] -= lr * (mhat / (sqrt(vhat) + eps) + (is_w ? wd * rp[i] : 0.0));
            }
            assert_int_equal(optim_step(&o, f->dev, f->params, f->grads, lrs[t - 1]), 0);
        }
        assert_int_equal(o.t, STEPS);
        assert_int_equal(vgpu_memcpy_dtoh(f->dev, p, f->params, sizeof p), 0);
        fprintf(stderr, "  %s momentum=%g weight_decay=%g beta2=%.8g\n", cases[c].optimizer,
                cases[c].momentum, cases[c].weight_decay, cfg.train.beta2);
        assert_allclose(p, rp, N, 1e-6, 1e-5);
        // The state holds the reference's moments.
        float st[2 * N];
        assert_int_equal(vgpu_memcpy_dtoh(f->dev, st, o.state, o.state_count * 4), 0);
        assert_allclose(st, m, N, 1e-6, 1e-5);
        if (!is_sgd)
            assert_allclose(st + N, v, N, 1e-7, 1e-4);
        optim_free(&o, f->dev);
    }
}

// Weight decay alone, worked out by hand. With a zero gradient SGD takes
// g = wd * w, v = momentum * v + g, w -= lr * v. lr = 0.25, wd = 0.5 and
// momentum 0.5 keep every product exact in float for weights k / 4, so:
// step 1 gives exactly w * (1 - lr * wd) = 0.875 w (decay dropped: w; wrong
// sign: 1.125 w; applied twice: 0.75 w); step 2, where the velocity carries
// 0.5 * 0.5 w and g = 0.5 * 0.875 w, gives 0.875 w - 0.25 * 0.6875 w =
// 0.703125 w. AdamW decays the weight itself by the same factor, and with a
// zero gradient its moment term is 0: 0.875 w too. A zero weight stays 0.
static void test_weight_decay_exact(void **state)
{
    struct fixture *f = *state;
    static const struct {
        const char *optimizer;
        int steps;
        double factor; // w after `steps` steps / w before
    } cases[] = {{"sgd", 1, 0.875}, {"sgd", 2, 0.703125}, {"adamw", 1, 0.875}};
    float p0[N], p[N], zero[N] = {0};
    double want[N];
    for (int i = 0; i < N; i++)
        p0[i] = 0.25f * (float)(i - N / 2); // -4.5 .. 4.5, 0 at N / 2
    assert_int_equal(vgpu_memcpy_htod(f->dev, f->grads, zero, sizeof zero), 0);
    for (size_t c = 0; c < TEST_ARRAY_LEN(cases); c++) {
        struct train_config cfg;
        train_config_defaults(&cfg);
        set_key_(&cfg, "train.optimizer", cases[c].optimizer);
        cfg.train.momentum = 0.5;
        cfg.train.weight_decay = 0.5;
        struct optimizer *o = &f->opt;
        assert_int_equal(optim_init(o, f->dev, &cfg, N), 0);
        assert_int_equal(vgpu_memcpy_htod(f->dev, f->params, p0, sizeof p0), 0);
        for (int t = 0; t < cases[c].steps; t++)
            assert_int_equal(optim_step(o, f->dev, f->params, f->grads, 0.25f), 0);
        assert_int_equal(vgpu_memcpy_dtoh(f->dev, p, f->params, sizeof p), 0);
        for (int i = 0; i < N; i++)
            want[i] = cases[c].factor * p0[i];
        fprintf(stderr, "  %s, %d step(s): w * %g\n", cases[c].optimizer, cases[c].steps,
                cases[c].factor);
        assert_allclose(p, want, N, 0.0, 0.0); // exact
        optim_free(o, f->dev);
    }
}

// Adam's bias correction, worked out by hand. With a constant gradient g,
// after t steps m = (1 - b1^t) g and v = (1 - b2^t) g^2, so the corrected
// moments are g and g^2 and every step moves each weight by
// lr * g / (|g| + eps): lr * sign(g) to within 1e-5 here, whatever |g|
// (1e-3 to 10) and whatever the step's lr. Without the correction step 1
// would move by (1 - b1) / sqrt(1 - b2) = 3.16 lr (b1 0.9, b2 0.999); with
// the step number off by one (t + 1), by 0.74 lr; a correction stuck at
// step 1 gives 1.34 lr at step 2.
static void test_adam_bias_correction(void **state)
{
    struct fixture *f = *state;
    static const float lrs[] = {0.01f, 0.02f, 0.005f, 0.01f, 0.03f};
    struct train_config cfg;
    train_config_defaults(&cfg);
    set_key_(&cfg, "train.optimizer", "adam");
    cfg.train.beta1 = 0.9;
    cfg.train.beta2 = 0.999;
    cfg.train.eps = 1e-8;
    cfg.train.weight_decay = 0;
    struct optimizer *o = &f->opt;
    assert_int_equal(optim_init(o, f->dev, &cfg, N), 0);
    float before[N], after[N], g[N];
    double moved[N], want[N];
    uint64_t seed = 3;
    test_fill_uniform(before, N, &seed, -1, 1);
    static const float mags[] = {1e-3f, 1e-2f, 0.1f, 1.0f, 10.0f};
    for (int i = 0; i < N; i++)
        g[i] = (i % 2 ? -1.0f : 1.0f) * mags[i % 5];
    assert_int_equal(vgpu_memcpy_htod(f->dev, f->params, before, sizeof before), 0);
    assert_int_equal(vgpu_memcpy_htod(f->dev, f->grads, g, sizeof g), 0);
    for (size_t t = 0; t < TEST_ARRAY_LEN(lrs); t++) {
        assert_int_equal(optim_step(o, f->dev, f->params, f->grads, lrs[t]), 0);
        assert_int_equal(vgpu_memcpy_dtoh(f->dev, after, f->params, sizeof after), 0);
        for (int i = 0; i < N; i++) {
            moved[i] = (double)before[i] - (double)after[i];
            want[i] = g[i] > 0 ? lrs[t] : -lrs[t];
        }
        fprintf(stderr, "  step %zu, lr %g\n", t + 1, lrs[t]);
        // 1e-4 of lr: the float rounding of the weights (about 1e-7) and eps / |g|.
        assert_allclose(moved, want, N, 1e-7, 1e-4);
        memcpy(before, after, sizeof before);
    }
    optim_free(o, f->dev);
}

// train.grad_clip, as torch.nn.utils.clip_grad_norm_: a gradient whose norm
// is above the clip is scaled by clip / (norm + 1e-6) (exact values, the
// norm measured and read back by optim_last_norm); one below it, or clip 0,
// is left as it is. Adam's steps count from 1: a step 0 is refused.
static void test_clip_by_norm(void **state)
{
    struct fixture *f = *state;
    struct train_config cfg;
    train_config_defaults(&cfg);
    set_key_(&cfg, "train.optimizer", "sgd");
    float g[N], got[N];
    double norm_sq = 0;
    for (int i = 0; i < N; i++) {
        g[i] = (float)(i % 7) - 3.0f; // exact squares: the norm is exact in double
        norm_sq += (double)g[i] * g[i];
    }
    const double norm = sqrt(norm_sq);
    struct optimizer *o = &f->opt;
    static const double clips[] = {0, 1.0, 1e9};
    for (size_t c = 0; c < TEST_ARRAY_LEN(clips); c++) {
        cfg.train.grad_clip = clips[c];
        assert_int_equal(optim_init(o, f->dev, &cfg, N), 0);
        double last_norm = -1;
        assert_int_equal(optim_last_norm(o, f->dev, &last_norm), 0);
        assert_true(last_norm == 0); // before the first clip
        assert_int_equal(vgpu_memcpy_htod(f->dev, f->grads, g, sizeof g), 0);
        assert_int_equal(optim_clip(o, f->dev, f->grads), 0);
        assert_int_equal(vgpu_memcpy_dtoh(f->dev, got, f->grads, sizeof got), 0);
        const float coef = (float)clips[c] / ((float)norm + 1e-6f);
        for (int i = 0; i < N; i++)
            assert_true(got[i] == (clips[c] > 0 && coef < 1.0f ? g[i] * coef : g[i]));
        assert_int_equal(optim_last_norm(o, f->dev, &last_norm), 0);
        if (clips[c] > 0)
            assert_float_equal(last_norm, norm, 1e-6 * norm);
        else
            assert_true(last_norm == 0);
        optim_free(o, f->dev);
    }
    set_key_(&cfg, "train.optimizer", "adam");
    cfg.train.grad_clip = 0;
    assert_int_equal(optim_init(o, f->dev, &cfg, N), 0);
    assert_int_equal(optim_update_range(o, f->dev, f->params, f->grads, 0.01f, 0, N), VGPU_EINVAL);
    optim_free(o, f->dev);
}

// The three optimizers really differ on the same input (no silent fallback
// to one of them).
static void test_optimizers_differ(void **state)
{
    struct fixture *f = *state;
    static const char *names[] = {"sgd", "adam", "adamw"};
    float out[3][N], p0[N], g[N];
    uint64_t seed = 5;
    test_fill_uniform(p0, N, &seed, -1, 1);
    test_fill_uniform(g, N, &seed, -1, 1);
    for (int k = 0; k < 3; k++) {
        struct train_config cfg;
        train_config_defaults(&cfg);
        set_key_(&cfg, "train.optimizer", names[k]);
        cfg.train.weight_decay = 0.5;
        struct optimizer o;
        assert_int_equal(optim_init(&o, f->dev, &cfg, N), 0);
        assert_int_equal(vgpu_memcpy_htod(f->dev, f->params, p0, sizeof p0), 0);
        assert_int_equal(vgpu_memcpy_htod(f->dev, f->grads, g, sizeof g), 0);
        assert_int_equal(optim_step(&o, f->dev, f->params, f->grads, 0.1f), 0);
        assert_int_equal(vgpu_memcpy_dtoh(f->dev, out[k], f->params, sizeof out[k]), 0);
        optim_free(&o, f->dev);
    }
    assert_memory_not_equal(out[0], out[1], sizeof out[0]);
    assert_memory_not_equal(out[1], out[2], sizeof out[0]);
    assert_memory_not_equal(out[0], out[2], sizeof out[0]);
}

// The sharded form (optim_begin_step, then optim_update_range on pieces that
// cover the parameters, in any order) gives exactly optim_step's result, for
// every optimizer, over three steps; a range past the end is refused.
static void test_ranges_equal_full_step(void **state)
{
    struct fixture *f = *state;
    static const char *names[] = {"sgd", "adam", "adamw"};
    float full[N], pieces[N], p0[N], g[N];
    uint64_t seed = 9;
    test_fill_uniform(p0, N, &seed, -1, 1);
    test_fill_uniform(g, N, &seed, -1, 1);
    const size_t cut[] = {0, 5, N / 2, N / 2 + 3, N};
    for (int k = 0; k < 3; k++) {
        struct train_config cfg;
        train_config_defaults(&cfg);
        set_key_(&cfg, "train.optimizer", names[k]);
        cfg.train.weight_decay = 0.25;
        for (int sharded = 0; sharded < 2; sharded++) {
            struct optimizer o;
            assert_int_equal(optim_init(&o, f->dev, &cfg, N), 0);
            assert_int_equal(vgpu_memcpy_htod(f->dev, f->params, p0, sizeof p0), 0);
            assert_int_equal(vgpu_memcpy_htod(f->dev, f->grads, g, sizeof g), 0);
            for (int step = 0; step < 3; step++) {
                if (!sharded) {
                    assert_int_equal(optim_step(&o, f->dev, f->params, f->grads, 0.05f), 0);
                    continue;
                }
                optim_begin_step(&o);
                for (int i = 3; i >= 0; i--) // pieces out of order
                    assert_int_equal(optim_update_range(&o, f->dev, f->params, f->grads, 0.05f,
                                                        cut[i], cut[i + 1] - cut[i]), 0);
            }
            assert_int_equal(optim_update_range(&o, f->dev, f->params, f->grads, 0.05f, N - 1, 2),
                             VGPU_EINVAL);
            assert_int_equal(vgpu_memcpy_dtoh(f->dev, sharded ? pieces : full, f->params,
                                              sizeof full), 0);
            optim_free(&o, f->dev);
        }
        assert_memory_equal(full, pieces, sizeof full);
    }
}

int main(void)
{
    log_set_trace(0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lr_schedules),
        cmocka_unit_test(test_lr_shapes),
        cmocka_unit_test_setup_teardown(test_state_sizes, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_steps_vs_reference, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_weight_decay_exact, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_adam_bias_correction, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_clip_by_norm, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_optimizers_differ, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_ranges_equal_full_step, setup_dev, teardown_dev),
    };
    return cmocka_run_group_tests(tests, NULL, test_rank_group_teardown);
}
