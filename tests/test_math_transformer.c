// test_math_transformer.c: the transformer's operations (math_transformer.h)
// and add, scale, sum_squares and clip_by_norm (math_ops.h) on a virtual
// GPU, against plain double-precision references written here: exact values
// for the embeddings and clip_by_norm (and its boundary, a factor of exactly
// 1), central finite differences of the references for the backward passes,
// attention's causality and 1/sqrt(hs) scale, the argument checks;
// and (CPU only) the element functions run as a GPU grid runs them, against
// the CPU device's bits (attention's and GELU's to rounding: the CPU's run on
// the BLAS and libmvec).
//
// `test_math_transformer cuda` runs the device tests on the first GPU; it
// exits 77 (skipped) when the CUDA backend is not built or no GPU is visible.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "device.h"
#include "log.h"
#include "math_ops.h"
#include "status.h"
#include "test_util.h"

#define CAP_BYTES (4u << 20)

static enum device_kind g_kind = DEVICE_KIND_CPU;

// ---- fixture and helpers ----

static int setup_dev(void **state) { return test_device_setup(state, g_kind, CAP_BYTES); }

static int teardown_dev(void **state) { return test_device_teardown(state); }

static void *upload_bytes_(device_t *dev, const void *host, size_t bytes)
{
    void *d = NULL;
    assert_int_equal(device_alloc(dev, bytes ? bytes : 1, &d), 0);
    if (bytes)
        assert_int_equal(device_copy_to_device(dev, d, host, bytes), 0);
    return d;
}

static float *upload_(device_t *dev, const float *host, size_t n)
{
    return upload_bytes_(dev, host, n * sizeof(float));
}

static void download_(device_t *dev, float *host, const float *d, size_t n)
{
    assert_int_equal(device_copy_to_host(dev, host, d, n * sizeof(float)), 0);
}

static float *floats_(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static double *doubles_(size_t n) { return calloc(n ? n : 1, sizeof(double)); }

static double *to_double_(const float *x, size_t n)
{
    double *d = doubles_(n);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

// Fails at the first element whose bits differ.
static void assert_bits_(const char *what, const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)))
            fail_msg("%s[%zu]: got %.9g, want %.9g (bitwise)", what, i, got[i], want[i]);
}

// Central differences of loss at x (double, step h relative to |x| >= 1).
typedef double (*loss_fn)(const double *x, const void *ctx);
static void finite_diff_(loss_fn loss, double *x, size_t n, const void *ctx, double *grad)
{
    for (size_t i = 0; i < n; i++) {
        const double x0 = x[i], h = 1e-5 * (fabs(x0) > 1.0 ? fabs(x0) : 1.0);
        x[i] = x0 + h;
        double up = loss(x, ctx);
        x[i] = x0 - h;
        double down = loss(x, ctx);
        x[i] = x0;
        grad[i] = (up - down) / (2.0 * h);
    }
}

// ---- embeddings ----

// Small values whose sums are exact in float: the outputs are exact.
static void test_embed_forward(void **state)
{
    device_t *dev = *state;
    static const int sizes[][4] = {{2, 3, 5, 7}, {1, 1, 1, 1}, {3, 1, 4, 2}}; // B, T, C, V
    for (size_t s = 0; s < TEST_ARRAY_LEN(sizes); s++) {
        const int B = sizes[s][0], T = sizes[s][1], C = sizes[s][2], V = sizes[s][3];
        const size_t bt = (size_t)B * T;
        int32_t *tok = calloc(bt, sizeof *tok);
        float *wte = floats_((size_t)V * C), *wpe = floats_((size_t)T * C), *out = floats_(bt * C);
        for (size_t i = 0; i < bt; i++)
            tok[i] = (int32_t)((i * 3 + 1) % (size_t)V); // repeats across rows
        for (size_t i = 0; i < (size_t)V * C; i++)
            wte[i] = (float)i / 8.0f - 3.0f;
        for (size_t i = 0; i < (size_t)T * C; i++)
            wpe[i] = (float)i / 16.0f + 0.25f;
        int32_t *d_tok = upload_bytes_(dev, tok, bt * sizeof *tok);
        float *d_wte = upload_(dev, wte, (size_t)V * C), *d_wpe = upload_(dev, wpe, (size_t)T * C);
        float *d_out = upload_(dev, out, bt * C);
        assert_int_equal(math_embed_forward(dev, d_out, d_tok, d_wte, d_wpe, B, T, C, V), 0);
        download_(dev, out, d_out, bt * C);
        for (size_t p = 0; p < bt; p++)
            for (size_t c = 0; c < (size_t)C; c++) {
                double want = (double)wte[tok[p] * C + c] + wpe[(p % T) * C + c];
                if (out[p * C + c] != want)
                    fail_msg("embed B%d T%d C%d: out[%zu,%zu] = %g, want %g", B, T, C, p, c,
                             out[p * C + c], want);
            }
        device_free(dev, d_out), device_free(dev, d_wpe), device_free(dev, d_wte);
        device_free(dev, d_tok);
        free(tok), free(wte), free(wpe), free(out);
    }
}

// Runs embed_backward on host copies; dwte, dwpe are updated in place.
static void embed_backward_on_(device_t *dev, float *dwte, float *dwpe, const float *dout,
                               const int32_t *tok, int B, int T, int C, int V)
{
    const size_t bt = (size_t)B * T;
    float *d_dwte = upload_(dev, dwte, (size_t)V * C), *d_dwpe = upload_(dev, dwpe, (size_t)T * C);
    float *d_dout = upload_(dev, dout, bt * C);
    int32_t *d_tok = upload_bytes_(dev, tok, bt * sizeof *tok);
    assert_int_equal(math_embed_backward(dev, d_dwte, d_dwpe, d_dout, d_tok, B, T, C, V), 0);
    download_(dev, dwte, d_dwte, (size_t)V * C);
    download_(dev, dwpe, d_dwpe, (size_t)T * C);
    device_free(dev, d_tok), device_free(dev, d_dout), device_free(dev, d_dwpe);
    device_free(dev, d_dwte);
}

// A hand-worked case, then random ones against the contract's order of
// summation (each element: its old value, then the terms in (b, t) order),
// bit for bit.
static void test_embed_backward(void **state)
{
    device_t *dev = *state;
    {
        const int32_t tok[3] = {1, 0, 1}; // B 1, T 3, C 1, V 2: token 1 twice
        const float dout[3] = {1, 2, 4};
        float dwte[2] = {10, 20}, dwpe[3] = {100, 200, 300};
        embed_backward_on_(dev, dwte, dwpe, dout, tok, 1, 3, 1, 2);
        assert_true(dwte[0] == 12 && dwte[1] == 25);
        assert_true(dwpe[0] == 101 && dwpe[1] == 202 && dwpe[2] == 304);
    }
    static const int sizes[][4] = {{2, 3, 5, 4}, {4, 1, 3, 2}, {3, 8, 6, 5}, {1, 1, 1, 1}};
    uint64_t seed = 46;
    for (size_t s = 0; s < TEST_ARRAY_LEN(sizes); s++) {
        const int B = sizes[s][0], T = sizes[s][1], C = sizes[s][2], V = sizes[s][3];
        const size_t bt = (size_t)B * T, nte = (size_t)V * C, npe = (size_t)T * C;
        int32_t *tok = calloc(bt, sizeof *tok);
        float *dwte = floats_(nte), *dwpe = floats_(npe), *dout = floats_(bt * C);
        float *want_te = floats_(nte), *want_pe = floats_(npe);
        for (size_t i = 0; i < bt; i++)
            tok[i] = (int32_t)(test_rand_u64(&seed) % (uint64_t)V);
        test_fill_uniform(dwte, nte, &seed, -1, 1);
        test_fill_uniform(dwpe, npe, &seed, -1, 1);
        test_fill_uniform(dout, bt * C, &seed, -1, 1);
        memcpy(want_te, dwte, nte * sizeof(float));
        memcpy(want_pe, dwpe, npe * sizeof(float));
        for (size_t p = 0; p < bt; p++)
            for (size_t c = 0; c < (size_t)C; c++) {
                want_te[tok[p] * C + c] += dout[p * C + c];
                want_pe[(p % T) * C + c] += dout[p * C + c];
            }
        embed_backward_on_(dev, dwte, dwpe, dout, tok, B, T, C, V);
        assert_bits_("dwte", dwte, want_te, nte);
        assert_bits_("dwpe", dwpe, want_pe, npe);
        free(tok), free(dwte), free(dwpe), free(dout), free(want_te), free(want_pe);
    }
}

// A token outside [0, V) is refused when the call returns; backward writes
// nothing; a good call afterwards works.
static void test_embed_bad_token(void **state)
{
    device_t *dev = *state;
    enum { B = 2, T = 2, C = 3, V = 4 };
    float wte[V * C], wpe[T * C], out[B * T * C] = {0}, keep_te[V * C], keep_pe[T * C];
    for (int i = 0; i < V * C; i++)
        wte[i] = (float)i;
    for (int i = 0; i < T * C; i++)
        wpe[i] = (float)-i;
    float *d_wte = upload_(dev, wte, V * C), *d_wpe = upload_(dev, wpe, T * C);
    float *d_out = upload_(dev, out, B * T * C);
    int32_t *d_tok = NULL;
    assert_int_equal(device_alloc(dev, B * T * sizeof(int32_t), (void **)&d_tok), 0);
    static const int32_t bad[][B * T] = {{0, 1, 2, V}, {-1, 0, 0, 0}, {3, INT32_MIN, 1, 1}};
    fprintf(stderr, "  (expected token messages follow)\n");
    for (size_t k = 0; k < TEST_ARRAY_LEN(bad); k++) {
        assert_int_equal(device_copy_to_device(dev, d_tok, bad[k], sizeof bad[k]), 0);
        assert_int_equal(math_embed_forward(dev, d_out, d_tok, d_wte, d_wpe, B, T, C, V),
                         VGPU_EINVAL);
        assert_int_equal(math_embed_backward(dev, d_wte, d_wpe, d_out, d_tok, B, T, C, V),
                         VGPU_EINVAL);
        download_(dev, keep_te, d_wte, V * C);
        download_(dev, keep_pe, d_wpe, T * C);
        assert_bits_("dwte after a bad token", keep_te, wte, V * C);
        assert_bits_("dwpe after a bad token", keep_pe, wpe, T * C);
    }
    static const int32_t good[B * T] = {3, 0, 3, 1};
    assert_int_equal(device_copy_to_device(dev, d_tok, good, sizeof good), 0);
    assert_int_equal(math_embed_forward(dev, d_out, d_tok, d_wte, d_wpe, B, T, C, V), 0);
    download_(dev, out, d_out, B * T * C);
    assert_true(out[0] == wte[3 * C] + wpe[0] && out[C + 2] == wte[2] + wpe[C + 2]);
    device_free(dev, d_tok), device_free(dev, d_out), device_free(dev, d_wpe);
    device_free(dev, d_wte);
}

// ---- layer norm ----

static void ref_layernorm_(const double *x, const double *w, const double *b, int rows, int C,
                           double *out, double *mean, double *rstd)
{
    for (int r = 0; r < rows; r++) {
        const double *xr = x + (size_t)r * C;
        double m = 0, v = 0;
        for (int c = 0; c < C; c++)
            m += xr[c];
        m /= C;
        for (int c = 0; c < C; c++)
            v += (xr[c] - m) * (xr[c] - m);
        v /= C;
        const double s = 1.0 / sqrt(v + 1e-5);
        for (int c = 0; c < C; c++)
            out[(size_t)r * C + c] = (xr[c] - m) * s * w[c] + b[c];
        if (mean)
            mean[r] = m, rstd[r] = s;
    }
}

// Row r of x: by r % 4, scale 1, a small variance (where eps matters), a
// constant row (variance 0), scale 3 around 1.
static void layernorm_input_(float *x, int rows, int C, uint64_t *seed, int kinds)
{
    static const double scale[4] = {1.0, 0.01, 0.0, 3.0}, offset[4] = {0.0, 0.0, 0.5, 1.0};
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < C; c++) {
            int k = r % kinds;
            x[(size_t)r * C + c] = (float)(offset[k] + scale[k] * test_rand_uniform(seed, -1, 1));
        }
}

static void test_layernorm_forward(void **state)
{
    device_t *dev = *state;
    static const int sizes[][2] = {{5, 7}, {3, 64}, {1, 1}, {9, 33}}; // rows, C
    uint64_t seed = 7;
    for (size_t s = 0; s < TEST_ARRAY_LEN(sizes); s++) {
        const int rows = sizes[s][0], C = sizes[s][1];
        const size_t n = (size_t)rows * C;
        float *x = floats_(n), *w = floats_(C), *b = floats_(C), *out = floats_(n);
        float *mean = floats_(rows), *rstd = floats_(rows);
        layernorm_input_(x, rows, C, &seed, 4);
        test_fill_uniform(w, C, &seed, 0.5, 1.5);
        test_fill_uniform(b, C, &seed, -0.5, 0.5);
        double *xd = to_double_(x, n), *wd = to_double_(w, C), *bd = to_double_(b, C);
        double *want = doubles_(n), *want_m = doubles_(rows), *want_s = doubles_(rows);
        ref_layernorm_(xd, wd, bd, rows, C, want, want_m, want_s);
        float *d_x = upload_(dev, x, n), *d_w = upload_(dev, w, C), *d_b = upload_(dev, b, C);
        float *d_out = upload_(dev, out, n), *d_m = upload_(dev, mean, rows),
              *d_s = upload_(dev, rstd, rows);
        assert_int_equal(math_layernorm_forward(dev, d_out, d_m, d_s, d_x, d_w, d_b, rows, C), 0);
        download_(dev, out, d_out, n);
        download_(dev, mean, d_m, rows);
        download_(dev, rstd, d_s, rows);
        assert_allclose(out, want, n, 1e-5, 1e-5);
        assert_allclose(mean, want_m, rows, 1e-6, 1e-5);
        assert_allclose(rstd, want_s, rows, 0.0, 1e-5);
        device_free(dev, d_s), device_free(dev, d_m), device_free(dev, d_out);
        device_free(dev, d_b), device_free(dev, d_w), device_free(dev, d_x);
        free(x), free(w), free(b), free(out), free(mean), free(rstd), free(xd), free(wd);
        free(bd), free(want), free(want_m), free(want_s);
    }
}

struct ln_ctx {
    int rows, C;
    const double *dout;
};

// sum(layernorm(inp; weight, bias) * dout), params = [inp | weight | bias].
static double ln_loss_(const double *params, const void *ctx)
{
    const struct ln_ctx *l = ctx;
    const size_t n = (size_t)l->rows * l->C;
    double *out = doubles_(n), loss = 0;
    ref_layernorm_(params, params + n, params + n + l->C, l->rows, l->C, out, NULL, NULL);
    for (size_t i = 0; i < n; i++)
        loss += out[i] * l->dout[i];
    free(out);
    return loss;
}

// All three gradients accumulate onto old values: got = old + the finite
// differences of the reference.
static void test_layernorm_backward(void **state)
{
    device_t *dev = *state;
    static const int sizes[][2] = {{5, 7}, {3, 16}, {1, 1}}; // rows, C
    uint64_t seed = 11;
    for (size_t s = 0; s < TEST_ARRAY_LEN(sizes); s++) {
        const int rows = sizes[s][0], C = sizes[s][1];
        const size_t n = (size_t)rows * C, np = n + 2 * (size_t)C;
        float *p = floats_(np), *dy = floats_(n), *old = floats_(np), *got = floats_(np);
        layernorm_input_(p, rows, C, &seed, 1); // scale 1: a smooth loss for the differences
        test_fill_uniform(p + n, C, &seed, 0.5, 1.5);
        test_fill_uniform(p + n + C, C, &seed, -0.5, 0.5);
        test_fill_uniform(dy, n, &seed, -1, 1);
        test_fill_uniform(old, np, &seed, -1, 1);
        double *pd = to_double_(p, np), *want = doubles_(np);
        const struct ln_ctx ctx = {rows, C, to_double_(dy, n)};
        finite_diff_(ln_loss_, pd, np, &ctx, want);
        for (size_t i = 0; i < np; i++)
            want[i] += old[i];
        float *d_x = upload_(dev, p, n), *d_w = upload_(dev, p + n, C),
              *d_b = upload_(dev, p + n + C, C), *d_dy = upload_(dev, dy, n);
        float *d_out = upload_(dev, dy, n), *d_m = upload_(dev, dy, rows),
              *d_s = upload_(dev, dy, rows);
        float *d_dx = upload_(dev, old, n), *d_dw = upload_(dev, old + n, C),
              *d_db = upload_(dev, old + n + C, C);
        assert_int_equal(math_layernorm_forward(dev, d_out, d_m, d_s, d_x, d_w, d_b, rows, C), 0);
        assert_int_equal(math_layernorm_backward(dev, d_dx, d_dw, d_db, d_dy, d_x, d_w, d_m, d_s,
                                                 rows, C),
                         0);
        download_(dev, got, d_dx, n);
        download_(dev, got + n, d_dw, C);
        download_(dev, got + n + C, d_db, C);
        assert_allclose(got, want, np, 2e-5, 1e-4);
        float *ds[] = {d_db, d_dw, d_dx, d_s, d_m, d_out, d_dy, d_b, d_w, d_x};
        for (size_t k = 0; k < TEST_ARRAY_LEN(ds); k++)
            device_free(dev, ds[k]);
        free(p), free(dy), free(old), free(got), free(pd), free(want), free((void *)ctx.dout);
    }
}

// ---- attention ----

static void ref_attention_(const double *qkv, int B, int T, int C, int NH, double *out,
                           double *att)
{
    const int hs = C / NH;
    const size_t C3 = 3 * (size_t)C;
    double *p = doubles_(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const double *q = qkv + ((size_t)b * T + t) * C3 + (size_t)h * hs;
                double max = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const double *k = qkv + ((size_t)b * T + u) * C3 + C + (size_t)h * hs;
                    double dot = 0;
                    for (int d = 0; d < hs; d++)
                        dot += q[d] * k[d];
                    p[u] = dot / sqrt((double)hs);
                    max = p[u] > max ? p[u] : max;
                }
                for (int u = 0; u <= t; u++)
                    sum += p[u] = exp(p[u] - max);
                for (int u = 0; u < T; u++)
                    p[u] = u <= t ? p[u] / sum : 0.0;
                if (att)
                    memcpy(att + (((size_t)b * NH + h) * T + t) * T, p, T * sizeof(double));
                for (int d = 0; d < hs; d++) {
                    double acc = 0;
                    for (int u = 0; u <= t; u++)
                        acc += p[u] * qkv[((size_t)b * T + u) * C3 + 2 * C + (size_t)h * hs + d];
                    out[((size_t)b * T + t) * C + (size_t)h * hs + d] = acc;
                }
            }
    free(p);
}

struct att_run {
    float *out, *att; // host results
};

// attention_forward on the device: out and att downloaded (att prefilled
// with 7s, so the zeros above the diagonal must be written).
static struct att_run attention_on_(device_t *dev, const float *qkv, int B, int T, int C, int NH)
{
    const size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    struct att_run r = {floats_(n), floats_(na)};
    for (size_t i = 0; i < na; i++)
        r.att[i] = 7.0f;
    float *d_qkv = upload_(dev, qkv, 3 * n), *d_out = upload_(dev, r.out, n),
          *d_att = upload_(dev, r.att, na);
    assert_int_equal(math_attention_forward(dev, d_out, d_att, d_qkv, B, T, C, NH), 0);
    download_(dev, r.out, d_out, n);
    download_(dev, r.att, d_att, na);
    device_free(dev, d_att), device_free(dev, d_out), device_free(dev, d_qkv);
    return r;
}

static const int att_sizes_[][4] = {
    {2, 5, 8, 2}, {1, 1, 4, 1}, {1, 7, 12, 3}, {2, 4, 6, 6}, {3, 3, 5, 1}}; // B, T, C, NH

static void test_attention_forward(void **state)
{
    device_t *dev = *state;
    uint64_t seed = 3;
    for (size_t s = 0; s < TEST_ARRAY_LEN(att_sizes_); s++) {
        const int B = att_sizes_[s][0], T = att_sizes_[s][1], C = att_sizes_[s][2],
                  NH = att_sizes_[s][3];
        const size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
        float *qkv = floats_(3 * n);
        test_fill_uniform(qkv, 3 * n, &seed, -2, 2);
        double *qd = to_double_(qkv, 3 * n), *want = doubles_(n), *want_att = doubles_(na);
        ref_attention_(qd, B, T, C, NH, want, want_att);
        struct att_run r = attention_on_(dev, qkv, B, T, C, NH);
        assert_allclose(r.att, want_att, na, 1e-6, 1e-5); // the zeros exactly (atol 1e-6 of 0)
        for (size_t i = 0; i < na; i++)
            if (want_att[i] == 0.0)
                assert_true(r.att[i] == 0.0f);
        assert_allclose(r.out, want, n, 1e-6, 1e-5);
        free(qkv), free(qd), free(want), free(want_att), free(r.out), free(r.att);
    }
}

// Changing a later position's key and value leaves every earlier position's
// output and attention row bitwise as it was (and does change its own).
static void test_attention_causal(void **state)
{
    device_t *dev = *state;
    enum { B = 2, T = 6, C = 8, NH = 2 };
    const size_t n = (size_t)B * T * C, C3 = 3 * C;
    float *qkv = floats_(3 * n);
    uint64_t seed = 5;
    test_fill_uniform(qkv, 3 * n, &seed, -1, 1);
    struct att_run base = attention_on_(dev, qkv, B, T, C, NH);
    for (int later = T - 1; later >= 1; later -= 3) {
        for (int b = 0; b < B; b++)
            for (size_t j = C; j < C3; j++) // k and v of position `later`
                qkv[((size_t)b * T + later) * C3 + j] += 0.5f;
        struct att_run r = attention_on_(dev, qkv, B, T, C, NH);
        for (int b = 0; b < B; b++) {
            const size_t row = (size_t)b * T * C;
            assert_bits_("out before the change", r.out + row, base.out + row, (size_t)later * C);
            assert_true(memcmp(r.out + row + (size_t)later * C, base.out + row + (size_t)later * C,
                               C * sizeof(float)));
            for (int h = 0; h < NH; h++) {
                const size_t a = ((size_t)b * NH + h) * T * T;
                assert_bits_("att before the change", r.att + a, base.att + a, (size_t)later * T);
            }
        }
        free(base.out), free(base.att);
        base = r;
    }
    free(base.out), free(base.att), free(qkv);
}

// One head of hs 4: position 1's query meets key 0 with q.k = 4 and key 1
// with 0, so its scores are 4 / sqrt(4) = 2 and 0.
static void test_attention_scale(void **state)
{
    device_t *dev = *state;
    enum { T = 2, C = 4 };
    const float qkv[T * 3 * C] = {
        0, 0, 0, 0, /* k0 */ 1, 1, 1, 1, /* v0 */ 1, 0, 0, 0,
        /* q1 */ 1, 1, 1, 1, /* k1 */ 0, 0, 0, 0, /* v1 */ 0, 1, 0, 0};
    struct att_run r = attention_on_(dev, qkv, 1, T, C, 1);
    const double p = exp(2.0) / (exp(2.0) + 1.0); // not exp(4) / (exp(4) + 1)
    const double want_att[T * T] = {1, 0, p, 1 - p}, want_out[T * C] = {1, 0, 0, 0, p, 1 - p, 0, 0};
    assert_allclose(r.att, want_att, T * T, 1e-7, 1e-6);
    assert_allclose(r.out, want_out, T * C, 1e-7, 1e-6);
    free(r.out), free(r.att);
}

struct att_ctx {
    int B, T, C, NH;
    const double *dout;
};

static double att_loss_(const double *qkv, const void *ctx)
{
    const struct att_ctx *a = ctx;
    const size_t n = (size_t)a->B * a->T * a->C;
    double *out = doubles_(n), loss = 0;
    ref_attention_(qkv, a->B, a->T, a->C, a->NH, out, NULL);
    for (size_t i = 0; i < n; i++)
        loss += out[i] * a->dout[i];
    free(out);
    return loss;
}

// dqkv (prefilled with garbage: it is overwritten) against the finite
// differences of sum(out * dout).
static void test_attention_backward(void **state)
{
    device_t *dev = *state;
    uint64_t seed = 9;
    for (size_t s = 0; s < TEST_ARRAY_LEN(att_sizes_); s++) {
        const int B = att_sizes_[s][0], T = att_sizes_[s][1], C = att_sizes_[s][2],
                  NH = att_sizes_[s][3];
        const size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
        float *qkv = floats_(3 * n), *dy = floats_(n), *got = floats_(3 * n),
              *junk = floats_(na > 3 * n ? na : 3 * n);
        test_fill_uniform(qkv, 3 * n, &seed, -1, 1);
        test_fill_uniform(dy, n, &seed, -1, 1);
        for (size_t i = 0; i < (na > 3 * n ? na : 3 * n); i++)
            junk[i] = 1e3f;
        double *qd = to_double_(qkv, 3 * n), *want = doubles_(3 * n);
        const struct att_ctx ctx = {B, T, C, NH, to_double_(dy, n)};
        finite_diff_(att_loss_, qd, 3 * n, &ctx, want);
        float *d_qkv = upload_(dev, qkv, 3 * n), *d_dy = upload_(dev, dy, n),
              *d_out = upload_(dev, dy, n), *d_att = upload_(dev, junk, na),
              *d_datt = upload_(dev, junk, na), *d_dqkv = upload_(dev, junk, 3 * n);
        assert_int_equal(math_attention_forward(dev, d_out, d_att, d_qkv, B, T, C, NH), 0);
        assert_int_equal(
            math_attention_backward(dev, d_dqkv, d_datt, d_dy, d_qkv, d_att, B, T, C, NH), 0);
        download_(dev, got, d_dqkv, 3 * n);
        assert_allclose(got, want, 3 * n, 1e-4, 1e-3);
        float *ds[] = {d_dqkv, d_datt, d_att, d_out, d_dy, d_qkv};
        for (size_t k = 0; k < TEST_ARRAY_LEN(ds); k++)
            device_free(dev, ds[k]);
        free(qkv), free(dy), free(got), free(junk), free(qd), free(want), free((void *)ctx.dout);
    }
}

// ---- GELU, add, scale ----

static double ref_gelu_(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// d/dx of ref_gelu_, by the chain rule with sech^2 = 1 / cosh^2.
static double ref_gelu_grad_(double x)
{
    const double k = sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x), ch = cosh(u);
    return 0.5 * (1.0 + tanh(u)) + 0.5 * x * k * (1.0 + 3 * 0.044715 * x * x) / (ch * ch);
}

// A few ulp of tanhf (6e-8 near +-1) through 0.5 x (1 + tanh u): absolute
// where 1 + tanh u cancels (x < 0, where the element functions are the less
// accurate), relative elsewhere.
#define GELU_ULPS_ATOL 4e-7
#define GELU_ULPS_RTOL 4e-7

static void test_gelu(void **state)
{
    device_t *dev = *state;
    enum { N = 181 };
    float x[N], dy[N], got[N], got2[N];
    double want[N], want_dx[N];
    static const float edge[] = {0.0f, -0.0f, 1e-4f, -1e-4f, 30.0f, -30.0f, 100.0f, -100.0f};
    for (int i = 0; i < N; i++)
        x[i] = i < 161 ? -8.0f + 0.1f * (float)i : edge[(i - 161) % TEST_ARRAY_LEN(edge)];
    uint64_t seed = 13;
    test_fill_uniform(dy, N, &seed, -2, 2);
    for (int i = 0; i < N; i++) {
        want[i] = ref_gelu_(x[i]);
        want_dx[i] = dy[i] * ref_gelu_grad_(x[i]);
    }
    float *d_x = upload_(dev, x, N), *d_out = upload_(dev, got, N), *d_dy = upload_(dev, dy, N);
    assert_int_equal(math_gelu_forward(dev, d_out, d_x, N), 0);
    download_(dev, got, d_out, N);
    assert_allclose(got, want, N, 1e-6, 1e-5);
    // The element functions' (libm's tanhf) within a few ulp of tanhf: the
    // CPU device writes tanh through libmvec's expf (cpu_transformer.c).
    double elem[N];
    for (int i = 0; i < N; i++) {
        float e;
        kernel_gelu_forward(0, &e, &x[i]);
        elem[i] = e;
    }
    assert_allclose(got, elem, N, GELU_ULPS_ATOL, GELU_ULPS_RTOL);
    assert_int_equal(math_gelu_backward(dev, d_out, d_x, d_dy, N), 0);
    download_(dev, got, d_out, N);
    assert_allclose(got, want_dx, N, 1e-6, 1e-4);
    for (int i = 0; i < N; i++) {
        float e;
        kernel_gelu_backward(0, &e, &x[i], &dy[i]);
        elem[i] = e;
    }
    // The element function's 1 - th^2 cancels near |th| = 1: an ulp of tanhf
    // there is 1.2e-7 of it, times |0.5 x du dy| up to 15 on these inputs.
    assert_allclose(got, elem, N, 2e-6, GELU_ULPS_RTOL);
    // In place: dinp = dout, out = inp; the same bits.
    assert_int_equal(math_gelu_backward(dev, d_dy, d_x, d_dy, N), 0);
    download_(dev, got2, d_dy, N);
    assert_bits_("gelu_backward in place", got2, got, N);
    assert_int_equal(math_gelu_forward(dev, d_out, d_x, N), 0);
    download_(dev, got, d_out, N);
    assert_int_equal(math_gelu_forward(dev, d_x, d_x, N), 0);
    download_(dev, got2, d_x, N);
    assert_bits_("gelu_forward in place", got2, got, N);
    device_free(dev, d_dy), device_free(dev, d_out), device_free(dev, d_x);
}

static void test_add_scale(void **state)
{
    device_t *dev = *state;
    enum { N = 1003 };
    float a[N], b[N], got[N], want[N];
    uint64_t seed = 17;
    test_fill_uniform(a, N, &seed, -3, 3);
    test_fill_uniform(b, N, &seed, -3, 3);
    float *d_a = upload_(dev, a, N), *d_b = upload_(dev, b, N), *d_o = upload_(dev, a, N);
    for (int i = 0; i < N; i++)
        want[i] = a[i] + b[i];
    assert_int_equal(math_add(dev, d_o, d_a, d_b, N), 0);
    download_(dev, got, d_o, N);
    assert_bits_("add", got, want, N);
    assert_int_equal(math_add(dev, d_a, d_a, d_b, N), 0); // out = a
    download_(dev, got, d_a, N);
    assert_bits_("add into a", got, want, N);
    for (int i = 0; i < N; i++)
        want[i] = b[i] + want[i];
    assert_int_equal(math_add(dev, d_a, d_b, d_a, N), 0); // out = b (here the second operand)
    download_(dev, got, d_a, N);
    assert_bits_("add into b", got, want, N);
    for (int i = 0; i < N; i++)
        want[i] *= 0.37f;
    assert_int_equal(math_scale(dev, d_a, 0.37f, N), 0);
    download_(dev, got, d_a, N);
    assert_bits_("scale", got, want, N);
    device_free(dev, d_o), device_free(dev, d_b), device_free(dev, d_a);
}

// ---- sum_squares ----

// The partition of math_ops.h, written out: blocks of 4096, 32 lanes each.
static float ref_sum_squares_(const float *x, size_t n)
{
    double total = 0;
    for (size_t start = 0; start < n; start += 4096) {
        double lane[32] = {0}, s = 0;
        for (size_t i = start; i < n && i < start + 4096; i++)
            lane[(i - start) % 32] += (double)x[i] * x[i];
        for (int j = 0; j < 32; j++)
            s += lane[j];
        total += s;
    }
    return (float)total;
}

static const size_t sq_sizes_[] = {1, 31, 32, 33, 4095, 4096, 4097, 3 * 4096 + 17, 100003};

// Magnitudes over six decades, so that the order of the sums shows.
static void sq_input_(float *x, size_t n, uint64_t *seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(test_rand_uniform(seed, -1, 1) * pow(10.0, test_rand_uniform(seed, -3, 3)));
}

static void test_sum_squares(void **state)
{
    device_t *dev = *state;
    uint64_t seed = 19;
    float *d_out = upload_(dev, (const float[]){-1.0f}, 1), got;
    for (size_t s = 0; s < TEST_ARRAY_LEN(sq_sizes_); s++) {
        const size_t n = sq_sizes_[s];
        float *x = floats_(n);
        sq_input_(x, n, &seed);
        double plain = 0;
        for (size_t i = 0; i < n; i++)
            plain += (double)x[i] * x[i];
        float *d_x = upload_(dev, x, n);
        assert_int_equal(math_sum_squares(dev, d_out, d_x, n), 0);
        download_(dev, &got, d_out, 1);
        const float want = ref_sum_squares_(x, n);
        if (memcmp(&got, &want, sizeof got))
            fail_msg("sum_squares n %zu: %.9g, the partition gives %.9g", n, got, want);
        assert_true(fabs(got - plain) <= 1e-6 * plain);
        device_free(dev, d_x);
        free(x);
    }
    {
        // A total on a float tie, 1 + 2^-24, where the order shows: block 0's
        // lane 0 is 1 + 2^-24, its lanes 1-31 and blocks 1-8 are 2^-53 each
        // (128 squares of 2^-60). Added in the partition's order each 2^-53
        // is half an ulp of the running sum and rounds away (to even), and
        // the float rounds the tie to 1; lanes or blocks summed as a tree
        // (or in halves) first would make 2^-49 or so, which stays and
        // rounds the float up to 1 + 2^-23.
        const size_t n = 9 * 4096;
        float *x = floats_(n);
        x[0] = 1.0f, x[32] = 0x1p-12f;
        for (size_t i = 0; i < 4096; i++)
            if (i % 32)
                x[i] = 0x1p-30f;
        for (size_t k = 1; k < 9; k++)
            for (size_t i = 0; i < 128; i++)
                x[k * 4096 + i] = 0x1p-30f;
        float *d_x = upload_(dev, x, n);
        assert_int_equal(math_sum_squares(dev, d_out, d_x, n), 0);
        download_(dev, &got, d_out, 1);
        assert_true(ref_sum_squares_(x, n) == 1.0f);
        if (got != 1.0f)
            fail_msg("sum_squares on a tie: %.9g, the partition's order gives 1", got);
        device_free(dev, d_x);
        free(x);
    }
    assert_int_equal(math_sum_squares(dev, d_out, d_out, 0), 0); // the sum of nothing
    download_(dev, &got, d_out, 1);
    assert_true(got == 0.0f);
    device_free(dev, d_out);
}

// ---- clip_by_norm ----

// x clipped to the norm clip from its sum of squares on the device, as
// torch's clip_grad_norm_ (float: coef = clip / (sqrt(sum) + 1e-6)): scaled
// by coef, bit for bit, when coef is below 1; left as it is (every bit) at
// coef exactly 1 and above; the sum itself untouched.
static void test_clip_by_norm(void **state)
{
    device_t *dev = *state;
    enum { N = 1003 };
    float x[N], got[N], want[N], sum;
    uint64_t seed = 29;
    test_fill_uniform(x, N, &seed, -2, 2);
    x[0] = -0.0f; // stays -0 when scaled
    float *d_x = upload_(dev, x, N), *d_sum = upload_(dev, (const float[]){0}, 1);
    assert_int_equal(math_sum_squares(dev, d_sum, d_x, N), 0);
    download_(dev, &sum, d_sum, 1);
    const float norm = sqrtf(sum), at_one = norm + 1e-6f; // the clip where coef is exactly 1
    assert_true(at_one / (norm + 1e-6f) == 1.0f);
    // Clips: far above the norm, exactly at coef 1, one float below that
    // (coef just under 1), half the norm, a ten-thousandth of it.
    const float clips[] = {1e9f, at_one, nextafterf(at_one, 0.0f), 0.5f * norm, 1e-4f * norm};
    for (size_t c = 0; c < TEST_ARRAY_LEN(clips); c++) {
        const float coef = clips[c] / (norm + 1e-6f);
        for (int i = 0; i < N; i++)
            want[i] = coef < 1.0f ? x[i] * coef : x[i];
        assert_int_equal(device_copy_to_device(dev, d_x, x, sizeof x), 0);
        assert_int_equal(math_clip_by_norm(dev, d_x, d_sum, clips[c], N), 0);
        download_(dev, got, d_x, N);
        assert_bits_("clip_by_norm", got, want, N);
        if (c < 2)
            assert_memory_equal(got, x, sizeof x); // coef >= 1: not a bit moved
        else { // scaled: to the clip's norm, within float rounding
            assert_true(coef < 1.0f);
            double sq = 0;
            for (int i = 0; i < N; i++)
                sq += (double)got[i] * got[i];
            assert_true(fabs(sqrt(sq) - clips[c]) <= 1e-5 * clips[c]);
        }
        float after;
        download_(dev, &after, d_sum, 1);
        assert_memory_equal(&after, &sum, sizeof sum);
    }
    { // exact values: 3, -4 (norm 5) clipped to 1: each times 1 / (5 + 1e-6) in float
        const float small[2] = {3.0f, -4.0f}, coef = 1.0f / (5.0f + 1e-6f);
        const float exact[2] = {3.0f * coef, -4.0f * coef};
        assert_int_equal(device_copy_to_device(dev, d_x, small, sizeof small), 0);
        assert_int_equal(device_copy_to_device(dev, d_sum, (const float[]){25.0f}, 4), 0);
        assert_int_equal(math_clip_by_norm(dev, d_x, d_sum, 1.0f, 2), 0);
        download_(dev, got, d_x, 2);
        assert_bits_("clip_by_norm 3, -4", got, exact, 2);
        assert_true(fabs(got[0] - 0.6) < 1e-6 && fabs(got[1] + 0.8) < 1e-6);
        // A zero gradient (sum 0): coef clip / 1e-6, nothing scaled.
        const float zeros[2] = {0.0f, -0.0f};
        assert_int_equal(device_copy_to_device(dev, d_x, zeros, sizeof zeros), 0);
        assert_int_equal(device_copy_to_device(dev, d_sum, (const float[]){0.0f}, 4), 0);
        assert_int_equal(math_clip_by_norm(dev, d_x, d_sum, 1.0f, 2), 0);
        download_(dev, got, d_x, 2);
        assert_memory_equal(got, zeros, sizeof zeros);
    }
    // A clip that is not positive is refused; n 0 does nothing; host pointers refused.
    fprintf(stderr, "  (expected argument messages follow)\n");
    assert_int_equal(math_clip_by_norm(dev, d_x, d_sum, 0.0f, N), VGPU_EINVAL);
    assert_int_equal(math_clip_by_norm(dev, d_x, d_sum, -1.0f, N), VGPU_EINVAL);
    assert_int_equal(math_clip_by_norm(dev, d_x, d_sum, NAN, N), VGPU_EINVAL);
    assert_int_equal(math_clip_by_norm(dev, NULL, NULL, 1.0f, 0), 0);
    assert_int_equal(math_clip_by_norm(dev, x, d_sum, 1.0f, N), VGPU_EINVAL);
    assert_int_equal(math_clip_by_norm(dev, d_x, &sum, 1.0f, N), VGPU_EINVAL);
    device_free(dev, d_sum), device_free(dev, d_x);
}

// ---- argument checks ----

// Bad sizes, C % NH, host and NULL pointers: VGPU_EINVAL, nothing written.
static void test_argument_checks(void **state)
{
    device_t *dev = *state;
    float host[64] = {0}, back[64];
    float *d = upload_(dev, host, 64), *e = upload_(dev, host, 64);
    int32_t *tok = upload_bytes_(dev, host, 4 * sizeof(int32_t)); // zeros: token 0
    fprintf(stderr, "  (expected argument messages follow)\n");
    // Sizes.
    assert_int_equal(math_attention_forward(dev, d, e, d, 1, 2, 6, 4), VGPU_EINVAL); // 6 % 4
    assert_int_equal(math_attention_backward(dev, d, e, d, d, e, 1, 2, 6, 4), VGPU_EINVAL);
    assert_int_equal(math_attention_forward(dev, d, e, d, 1, 2, 4, 0), VGPU_EINVAL);
    assert_int_equal(math_attention_forward(dev, d, e, d, -1, 2, 4, 1), VGPU_EINVAL);
    assert_int_equal(math_embed_forward(dev, d, tok, e, e, 1, 2, 2, 0), VGPU_EINVAL); // V 0
    assert_int_equal(math_embed_forward(dev, d, tok, e, e, 65536, 65536, 1, 2), VGPU_EINVAL);
    assert_int_equal(math_embed_backward(dev, d, e, d, tok, 1, -2, 2, 4), VGPU_EINVAL);
    assert_int_equal(math_layernorm_forward(dev, d, e, e, d, e, e, 2, 0), VGPU_EINVAL);
    assert_int_equal(math_layernorm_backward(dev, d, e, e, d, d, e, e, e, -1, 4), VGPU_EINVAL);
    // Host pointers and NULL where device memory belongs.
    assert_int_equal(math_embed_forward(dev, host, tok, e, e, 1, 2, 2, 4), VGPU_EINVAL);
    assert_int_equal(math_embed_forward(dev, d, (int32_t *)host, e, e, 1, 2, 2, 4), VGPU_EINVAL);
    assert_int_equal(math_embed_backward(dev, d, NULL, d, tok, 1, 2, 2, 4), VGPU_EINVAL);
    assert_int_equal(math_layernorm_forward(dev, d, e, e, d, host, e, 2, 4), VGPU_EINVAL);
    assert_int_equal(math_layernorm_backward(dev, d, e, e, d, d, e, e, NULL, 2, 4), VGPU_EINVAL);
    assert_int_equal(math_attention_forward(dev, d, NULL, e, 1, 2, 4, 2), VGPU_EINVAL);
    assert_int_equal(math_attention_backward(dev, d, e, host, d, e, 1, 2, 4, 2), VGPU_EINVAL);
    assert_int_equal(math_gelu_forward(dev, host, d, 8), VGPU_EINVAL);
    assert_int_equal(math_gelu_backward(dev, d, NULL, e, 8), VGPU_EINVAL);
    assert_int_equal(math_add(dev, d, host, e, 8), VGPU_EINVAL);
    assert_int_equal(math_scale(dev, NULL, 2.0f, 8), VGPU_EINVAL);
    assert_int_equal(math_sum_squares(dev, host, d, 8), VGPU_EINVAL);
    assert_int_equal(math_sum_squares(dev, d, NULL, 8), VGPU_EINVAL);
    // Past the end of an allocation's arena: as a GPU would fault.
    assert_int_equal(math_add(dev, d, e, d, CAP_BYTES), VGPU_EINVAL);
    // Nothing to do: nothing checked beyond the sizes, 0.
    assert_int_equal(math_layernorm_forward(dev, NULL, NULL, NULL, NULL, NULL, NULL, 0, 4), 0);
    assert_int_equal(math_attention_forward(dev, NULL, NULL, NULL, 0, 2, 4, 2), 0);
    assert_int_equal(math_embed_backward(dev, NULL, NULL, NULL, NULL, 1, 0, 2, 4), 0);
    assert_int_equal(math_gelu_forward(dev, NULL, NULL, 0), 0);
    download_(dev, back, d, 64);
    for (int i = 0; i < 64; i++)
        assert_true(back[i] == 0.0f);
    download_(dev, back, e, 64);
    for (int i = 0; i < 64; i++)
        assert_true(back[i] == 0.0f);
    device_free(dev, tok), device_free(dev, e), device_free(dev, d);
}

// ---- the GPU's decomposition (CPU only) ----

// The element functions as the CUDA kernels call them (a thread an element
// or row, in any order: here backwards) on host copies, against the CPU
// device's results: bit for bit where the CPU sums in another loop order,
// to rounding for attention (the CPU's runs on the BLAS).
static void test_gpu_decomposition(void **state)
{
    device_t *dev = *state;
    uint64_t seed = 23;
    { // embed_backward by chains
        enum { B = 3, T = 5, C = 4, V = 6, P = B * T };
        int32_t tok[P], next[P];
        uint8_t has_prev[P] = {0};
        float dwte[V * C], dwpe[T * C], dout[P * C], kte[V * C], kpe[T * C];
        for (int i = 0; i < P; i++)
            tok[i] = (int32_t)(test_rand_u64(&seed) % 4); // repeats, and rows never used
        test_fill_uniform(dwte, V * C, &seed, -1, 1);
        test_fill_uniform(dwpe, T * C, &seed, -1, 1);
        test_fill_uniform(dout, P * C, &seed, -1, 1);
        memcpy(kte, dwte, sizeof kte);
        memcpy(kpe, dwpe, sizeof kpe);
        for (size_t bt = P; bt-- > 0;)
            assert_int_equal(kernel_embed_link(bt, next, has_prev, tok, P, V), 1);
        for (size_t i = P * C; i-- > 0;)
            if (!has_prev[i / C])
                kernel_embed_backward_wte(i / C, i % C, kte, dout, tok, next, C);
        for (size_t i = T * C; i-- > 0;)
            kernel_embed_backward_wpe(i, kpe, dout, B, T, C);
        embed_backward_on_(dev, dwte, dwpe, dout, tok, B, T, C, V);
        assert_bits_("dwte (chains)", kte, dwte, V * C);
        assert_bits_("dwpe (columns)", kpe, dwpe, T * C);
    }
    { // layernorm_backward's parameter columns
        enum { R = 6, C = 9 };
        float x[R * C], w[C], dy[R * C], m[R], s[R], scratch[R * C], dw[C], db[C], kw[C], kb[C];
        test_fill_uniform(x, R * C, &seed, -1, 1);
        test_fill_uniform(w, C, &seed, 0.5, 1.5);
        test_fill_uniform(dy, R * C, &seed, -1, 1);
        test_fill_uniform(dw, C, &seed, -1, 1);
        test_fill_uniform(db, C, &seed, -1, 1);
        memcpy(kw, dw, sizeof kw);
        memcpy(kb, db, sizeof kb);
        for (size_t r = 0; r < R; r++)
            kernel_layernorm_forward(r, scratch, m, s, x, w, w, C);
        for (size_t c = C; c-- > 0;)
            kernel_layernorm_backward_param(c, kw, kb, dy, x, m, s, R, C);
        float *d_x = upload_(dev, x, R * C), *d_w = upload_(dev, w, C),
              *d_dy = upload_(dev, dy, R * C), *d_m = upload_(dev, m, R), *d_s = upload_(dev, s, R),
              *d_dx = upload_(dev, scratch, R * C), *d_dw = upload_(dev, dw, C),
              *d_db = upload_(dev, db, C);
        assert_int_equal(
            math_layernorm_backward(dev, d_dx, d_dw, d_db, d_dy, d_x, d_w, d_m, d_s, R, C), 0);
        download_(dev, dw, d_dw, C);
        download_(dev, db, d_db, C);
        assert_bits_("dweight (columns)", kw, dw, C);
        assert_bits_("dbias (columns)", kb, db, C);
        float *ds[] = {d_db, d_dw, d_dx, d_s, d_m, d_dy, d_w, d_x};
        for (size_t k = 0; k < TEST_ARRAY_LEN(ds); k++)
            device_free(dev, ds[k]);
    }
    { // attention: out by elements, dk and dv by elements
        enum { B = 2, T = 5, C = 6, NH = 2, N = B * T * C, NA = B * NH * T * T };
        float qkv[3 * N], dy[N], att[NA], datt[NA], out[N], dqkv[3 * N], got[3 * N];
        test_fill_uniform(qkv, 3 * N, &seed, -1, 1);
        test_fill_uniform(dy, N, &seed, -1, 1);
        for (size_t r = B * NH * T; r-- > 0;)
            kernel_attention_softmax(r, att, qkv, T, C, NH);
        for (size_t i = N; i-- > 0;)
            kernel_attention_out(i, out, att, qkv, T, C, NH);
        for (size_t r = B * NH * T; r-- > 0;)
            kernel_attention_backward_q(r, dqkv, datt, dy, qkv, att, T, C, NH);
        for (size_t i = N; i-- > 0;)
            kernel_attention_backward_kv(i, dqkv, datt, dy, qkv, att, T, C, NH);
        struct att_run r = attention_on_(dev, qkv, B, T, C, NH);
        // Close, not bitwise: the CPU takes attention's products on the BLAS
        // and its exponentials from libmvec (cpu_transformer.c), so its sums
        // run in the BLAS's order; the grid's must agree to rounding.
        double *want_att = to_double_(att, NA), *want_out = to_double_(out, N);
        assert_allclose(r.att, want_att, NA, 1e-6, 1e-5);
        assert_allclose(r.out, want_out, N, 1e-6, 1e-5);
        free(want_att), free(want_out);
        float *d_qkv = upload_(dev, qkv, 3 * N), *d_dy = upload_(dev, dy, N),
              *d_att = upload_(dev, att, NA), *d_datt = upload_(dev, att, NA),
              *d_dqkv = upload_(dev, qkv, 3 * N);
        assert_int_equal(
            math_attention_backward(dev, d_dqkv, d_datt, d_dy, d_qkv, d_att, B, T, C, NH), 0);
        download_(dev, got, d_dqkv, 3 * N);
        double *want_dqkv = to_double_(dqkv, 3 * N);
        assert_allclose(got, want_dqkv, 3 * N, 1e-6, 1e-5);
        free(want_dqkv);
        float *ds[] = {d_dqkv, d_datt, d_att, d_dy, d_qkv};
        for (size_t k = 0; k < TEST_ARRAY_LEN(ds); k++)
            device_free(dev, ds[k]);
        free(r.out), free(r.att);
    }
    { // sum_squares: blocks in any order, lanes combined in order
        const size_t n = 5 * MATH_SQ_BLOCK + 100, blocks = 6;
        float *x = floats_(n);
        sq_input_(x, n, &seed);
        double partial[6], lanes[MATH_SQ_LANES];
        for (size_t k = blocks; k-- > 0;) {
            for (int j = MATH_SQ_LANES; j-- > 0;)
                lanes[j] = kernel_sum_squares_lane(k, j, x, n);
            partial[k] = kernel_sum_in_order(lanes, MATH_SQ_LANES);
        }
        const float grid = (float)kernel_sum_in_order(partial, blocks);
        const float want = ref_sum_squares_(x, n);
        assert_true(!memcmp(&grid, &want, sizeof grid));
        free(x);
    }
}

int main(int argc, char **argv)
{
    log_set_trace(0);
    const struct CMUnitTest device_tests[] = {
        cmocka_unit_test_setup_teardown(test_embed_forward, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_embed_backward, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_embed_bad_token, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_layernorm_forward, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_layernorm_backward, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_attention_forward, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_attention_causal, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_attention_scale, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_attention_backward, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_gelu, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_add_scale, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_sum_squares, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_clip_by_norm, setup_dev, teardown_dev),
        cmocka_unit_test_setup_teardown(test_argument_checks, setup_dev, teardown_dev),
    };
    if (argc > 1 && !strcmp(argv[1], "cuda")) {
        struct device_info info[8];
        int count = 0;
        int rc = device_discover(DEVICE_KIND_CUDA, info, 8, &count, NULL, 0);
        if (rc == VGPU_EUNSUPPORTED) {
            printf("SKIP: the CUDA backend is not built\n");
            return 77;
        }
        if (rc || count == 0) {
            printf("SKIP: no GPU visible (rc %d)\n", rc);
            return 77;
        }
        printf("CUDA device: %s (%s)\n", info[0].name, info[0].pci_bus_id);
        g_kind = DEVICE_KIND_CUDA;
        return cmocka_run_group_tests_name("math_transformer_cuda", device_tests, NULL, NULL);
    }
    const struct CMUnitTest cpu_tests[] = {
        cmocka_unit_test_setup_teardown(test_gpu_decomposition, setup_dev, teardown_dev),
    };
    int failed = cmocka_run_group_tests_name("math_transformer", device_tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("math_transformer_gpu_decomposition", cpu_tests, NULL,
                                          NULL);
    return failed ? 1 : 0;
}
