// math_cpu.c: the model's math on a CPU-simulated virtual GPU (math_ops.h;
// the transformer's family is in cpu_transformer.c): the element functions
// in loops (vectorised by hand with AVX-512 where the compiler will not, or
// their sums in a loop order that vectorises: bitwise the same), GEMM
// through the build's BLAS (cpu_gemm.c), all on the device's host view of
// its memory, synchronously on the calling thread (the CPU device's stream).
#include <string.h>

#include "cpu_gemm.h"
#include "math_cpu_internal.h"

// The BLAS threads of this device's rank, set before its first operation
// (devices.cpu_threads; process-wide in every BLAS, hence once a device).
static char threads_set_;

void math_cpu_prepare(device_t *dev)
{
    if (dev->math != &threads_set_) {
        cpu_gemm_set_threads(dev->blas_threads);
        dev->math = &threads_set_;
    }
}

static int cpu_gemm_(device_t *dev, int trans_a, int trans_b, int m, int n, int k, float alpha,
                     const float *a, const float *b, float beta, float *c)
{
    math_cpu_prepare(dev);
    return cpu_gemm(trans_a, trans_b, m, n, k, alpha, CV_(a), CV_(b), beta, V_(c));
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define CPU_X86_AVX512_ 1

// kernel_decode_u8 on 16 codes at a time, the table held in 16 registers:
// eight two-register permutes pick by the code's low 5 bits, and bits 5-7
// choose among them in three rounds of blends; only bits move, so the values
// are the table's exactly. Returns how many it did. Half the time of the
// scalar loop (perf, np=1 on Fashion-MNIST: 2.3% of the run against 4.7%).
__attribute__((target("avx512f"))) static size_t
decode_u8_avx512_(float *out, const uint8_t *codes, const float *table, size_t n)
{
    __m512 t[16];
    for (int k = 0; k < 16; k++)
        t[k] = _mm512_loadu_ps(table + 16 * k);
    const __m512i bit5 = _mm512_set1_epi32(32), bit6 = _mm512_set1_epi32(64),
                  bit7 = _mm512_set1_epi32(128);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i c8;
        memcpy(&c8, codes + i, sizeof c8);
        const __m512i idx = _mm512_cvtepu8_epi32(c8);
        __m512 r[8];
        for (int k = 0; k < 8; k++)
            r[k] = _mm512_permutex2var_ps(t[2 * k], idx, t[2 * k + 1]);
        const __mmask16 m5 = _mm512_test_epi32_mask(idx, bit5),
                        m6 = _mm512_test_epi32_mask(idx, bit6),
                        m7 = _mm512_test_epi32_mask(idx, bit7);
        for (int k = 0; k < 4; k++)
            r[k] = _mm512_mask_blend_ps(m5, r[2 * k], r[2 * k + 1]);
        for (int k = 0; k < 2; k++)
            r[k] = _mm512_mask_blend_ps(m6, r[2 * k], r[2 * k + 1]);
        _mm512_storeu_ps(out + i, _mm512_mask_blend_ps(m7, r[0], r[1]));
    }
    return i;
}
#endif

static int cpu_decode_u8_(device_t *dev, float *out, const uint8_t *codes, const float *table,
                          size_t n)
{
    float *o = V_(out);
    const uint8_t *c = device_host_view(dev, codes);
    const float *tb = CV_(table);
    size_t i = 0;
#ifdef CPU_X86_AVX512_
    if (__builtin_cpu_supports("avx512f"))
        i = decode_u8_avx512_(o, c, tb, n);
#endif
    for (; i < n; i++)
        kernel_decode_u8(i, o, c, tb);
    return 0;
}

// The elementwise loops call the kernels.h kernels, except where a per-element
// kernel keeps the compiler from vectorising: bias_add (a modulo per element)
// and bias_grad (strided column sums) are the same arithmetic, row by row.

static int cpu_bias_add_(device_t *dev, float *out, const float *bias, int rows, int cols, int relu)
{
    float *o = V_(out);
    const float *bv = CV_(bias);
    for (size_t r = 0; r < (size_t)rows; r++) { // as kernel_bias_add
        float *restrict row = o + r * (size_t)cols;
        if (relu)
            for (size_t c = 0; c < (size_t)cols; c++) {
                float x = row[c] + bv[c];
                row[c] = x > 0.0f ? x : 0.0f;
            }
        else
            for (size_t c = 0; c < (size_t)cols; c++)
                row[c] += bv[c];
    }
    return 0;
}

static int cpu_bias_grad_(device_t *dev, float *dbias, const float *dout, int rows, int cols)
{
    float *restrict db = V_(dbias);
    const float *d = CV_(dout);
    // As kernel_bias_grad: per column, rows added in order from 0; but
    // reading dout row by row (contiguous, vectorisable).
    memset(db, 0, (size_t)cols * sizeof(float));
    for (size_t r = 0; r < (size_t)rows; r++) {
        const float *row = d + r * (size_t)cols;
        for (size_t c = 0; c < (size_t)cols; c++)
            db[c] += row[c];
    }
    return 0;
}

static int cpu_relu_backward_(device_t *dev, float *din, const float *dout, const float *out,
                              size_t n)
{
    float *di = V_(din);
    const float *d = CV_(dout), *o = CV_(out);
    for (size_t i = 0; i < n; i++)
        kernel_relu_backward(i, di, d, o);
    return 0;
}

static int cpu_softmax_xent_(device_t *dev, float *dlogits, float *stats, const float *logits,
                             const int32_t *labels, int rows, int classes, float grad_scale)
{
    float *dl = dlogits ? V_(dlogits) : NULL, *st = V_(stats);
    const float *z = CV_(logits);
    const int32_t *y = device_host_view(dev, labels);
    for (size_t r = 0; r < (size_t)rows; r++)
        if (kernel_softmax_xent(r, dl, st, z, y, classes, grad_scale) < 0) {
            log_error("softmax_xent: label %d of row %zu is outside [0, %d)", y[r], r, classes);
            return VGPU_EINVAL;
        }
    return 0;
}

static int cpu_axpby_(device_t *dev, float *y, float a, const float *x, float b, size_t n)
{
    float *yv = V_(y);
    const float *xv = CV_(x);
    for (size_t i = 0; i < n; i++)
        kernel_axpby(i, yv, a, xv, b);
    return 0;
}

static int cpu_sgd_step_(device_t *dev, float *param, const float *grad, float *velocity, size_t n,
                         float lr, float momentum, float weight_decay)
{
    float *p = V_(param), *v = V_(velocity);
    const float *g = CV_(grad);
    for (size_t i = 0; i < n; i++)
        kernel_sgd_step(i, p, g, v, lr, momentum, weight_decay);
    return 0;
}

#ifdef CPU_X86_AVX512_
// kernel_adam_step on 16 floats at a time; returns how many it did (the
// caller finishes the tail). The compiler keeps the kernel's loop scalar
// (sqrtf may set errno), and Adam took 1.6 ms of an 8.6 ms step (np=1,
// batch 256); this takes about 0.3 ms, the time to stream the four arrays.
// Same operations in the same order as the kernel (mul and add kept apart,
// correctly rounded sqrt and div): bitwise the kernel's results
// (tests/test_device_cpu.c checks). GCC would contract mul and add into FMA
// across statements; clang contracts only within one expression and has no
// optimize attribute.
#ifdef __clang__
#define ADAM_AVX512_FN_ __attribute__((target("avx512f")))
#else
#define ADAM_AVX512_FN_ __attribute__((target("avx512f"), optimize("fp-contract=off")))
#endif
ADAM_AVX512_FN_ static size_t
adam_avx512_(float *p, const float *g, float *m, float *v, size_t n, float beta1, float beta2,
             float eps, float weight_decay, struct adam_coefs c, int decoupled)
{
    const __m512 b1 = _mm512_set1_ps(beta1), b2 = _mm512_set1_ps(beta2);
    const __m512 one_b1 = _mm512_set1_ps(1.0f - beta1), one_b2 = _mm512_set1_ps(1.0f - beta2);
    const __m512 ve = _mm512_set1_ps(eps), wd = _mm512_set1_ps(weight_decay);
    const __m512 step = _mm512_set1_ps(c.step_size), rs2 = _mm512_set1_ps(c.inv_sqrt_bc2);
    const __m512 lr_wd = _mm512_set1_ps(c.lr_decay);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 gi = _mm512_loadu_ps(g + i), pi = _mm512_loadu_ps(p + i);
        if (!decoupled)
            gi = _mm512_add_ps(gi, _mm512_mul_ps(wd, pi));
        __m512 mi = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)),
                                  _mm512_mul_ps(one_b1, gi));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)),
                                  _mm512_mul_ps(_mm512_mul_ps(one_b2, gi), gi));
        _mm512_storeu_ps(m + i, mi);
        _mm512_storeu_ps(v + i, vi);
        __m512 den = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi), rs2), ve);
        __m512 delta = _mm512_mul_ps(step, _mm512_div_ps(mi, den));
        if (decoupled)
            delta = _mm512_add_ps(delta, _mm512_mul_ps(lr_wd, pi));
        _mm512_storeu_ps(p + i, _mm512_sub_ps(pi, delta));
    }
    return i;
}
#endif

static int cpu_adam_step_(device_t *dev, float *param, const float *grad, float *m, float *v,
                          size_t n, float lr, float beta1, float beta2, float eps,
                          float weight_decay, float bias_corr1, float bias_corr2, int decoupled)
{
    float *p = V_(param), *mv = V_(m), *vv = V_(v);
    const float *g = CV_(grad);
    const struct adam_coefs c = kernel_adam_coefs(lr, weight_decay, bias_corr1, bias_corr2);
    size_t i = 0;
#ifdef CPU_X86_AVX512_
    if (__builtin_cpu_supports("avx512f"))
        i = adam_avx512_(p, g, mv, vv, n, beta1, beta2, eps, weight_decay, c, decoupled);
#endif
    for (; i < n; i++)
        kernel_adam_step(i, p, g, mv, vv, beta1, beta2, eps, weight_decay, c, decoupled);
    return 0;
}

static int cpu_add_(device_t *dev, float *out, const float *a, const float *b, size_t n)
{
    float *o = V_(out);
    const float *av = CV_(a), *bv = CV_(b);
    for (size_t i = 0; i < n; i++)
        kernel_add(i, o, av, bv);
    return 0;
}

static int cpu_scale_(device_t *dev, float *x, float s, size_t n)
{
    float *xv = V_(x);
    for (size_t i = 0; i < n; i++)
        kernel_scale(i, xv, s);
    return 0;
}

// kernel_sum_squares_lane's sums with a block's lanes side by side, so that
// the loop vectorises: each lane adds the same terms in the same order, so
// the bits are the partition's (math_ops.h), as on a GPU.
static int cpu_sum_squares_(device_t *dev, float *out, const float *x, size_t n)
{
    const float *xv = CV_(x);
    double total = 0.0;
    for (size_t k = 0; k * MATH_SQ_BLOCK < n; k++) {
        const float *blk = xv + k * MATH_SQ_BLOCK;
        size_t len = n - k * MATH_SQ_BLOCK < MATH_SQ_BLOCK ? n - k * MATH_SQ_BLOCK : MATH_SQ_BLOCK;
        double lane[MATH_SQ_LANES] = {0};
        size_t i = 0;
        for (; i + MATH_SQ_LANES <= len; i += MATH_SQ_LANES)
            for (size_t j = 0; j < MATH_SQ_LANES; j++)
                lane[j] += (double)blk[i + j] * (double)blk[i + j];
        for (size_t j = 0; i + j < len; j++)
            lane[j] += (double)blk[i + j] * (double)blk[i + j];
        total += kernel_sum_in_order(lane, MATH_SQ_LANES);
    }
    *V_(out) = (float)total;
    return 0;
}

// The factor once, from the host view of the sum; nothing written when it is
// not below 1.
static int cpu_clip_by_norm_(device_t *dev, float *x, const float *sum_sq, float clip, size_t n)
{
    const float coef = kernel_clip_coef(*CV_(sum_sq), clip);
    if (coef < 1.0f) {
        float *xv = V_(x);
        for (size_t i = 0; i < n; i++)
            kernel_scale(i, xv, coef);
    }
    return 0;
}

static const struct math_ops math_cpu_ops_ = {
    .gemm = cpu_gemm_,
    .decode_u8 = cpu_decode_u8_,
    .bias_add = cpu_bias_add_,
    .bias_grad = cpu_bias_grad_,
    .relu_backward = cpu_relu_backward_,
    .softmax_xent = cpu_softmax_xent_,
    .axpby = cpu_axpby_,
    .sgd_step = cpu_sgd_step_,
    .adam_step = cpu_adam_step_,
    .add = cpu_add_,
    .scale = cpu_scale_,
    .sum_squares = cpu_sum_squares_,
    .clip_by_norm = cpu_clip_by_norm_,
    .transformer = &math_cpu_transformer_ops,
};

const struct math_ops *math_cpu_ops(void) { return &math_cpu_ops_; }
