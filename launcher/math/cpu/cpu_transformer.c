// cpu_transformer.c: the transformer's operations (math_transformer.h) on a
// CPU-simulated virtual GPU. Embeddings and layer norm run the element
// functions in loops (bitwise a GPU's); attention runs its products on the
// BLAS (cpu_gemm_ld), and GELU (tanh through expf) and the softmax's
// exponentials on glibc's vector math (libmvec) where the build has it and
// the CPU has AVX-512:
// those agree with the element functions to rounding, not bitwise.
#include <math.h>
#include <string.h>

#include "cpu_gemm.h"
#include "math_cpu_internal.h"

// ---- embeddings, layer norm ----

// Every token checked before anything is written.
static int check_tokens_(const char *op, const int32_t *tokens, int B, int T, int V)
{
    for (size_t bt = 0; bt < (size_t)B * T; bt++)
        if (!kernel_token_ok(tokens[bt], V)) {
            log_error("%s: token %d at b %zu, t %zu is outside [0, %d)", op, tokens[bt],
                      bt / (size_t)T, bt % (size_t)T, V);
            return VGPU_EINVAL;
        }
    return 0;
}

static int cpu_embed_forward_(device_t *dev, float *out, const int32_t *tokens, const float *wte,
                              const float *wpe, int B, int T, int C, int V)
{
    float *o = V_(out);
    const int32_t *tok = device_host_view(dev, tokens);
    const float *e = CV_(wte), *p = CV_(wpe);
    TRY(check_tokens_("embed_forward", tok, B, T, V));
    for (size_t bt = 0; bt < (size_t)B * T; bt++)
        for (size_t c = 0; c < (size_t)C; c++)
            kernel_embed_forward(bt, c, o, tok, e, p, T, C);
    return 0;
}

static int cpu_embed_backward_(device_t *dev, float *dwte, float *dwpe, const float *dout,
                               const int32_t *tokens, int B, int T, int C, int V)
{
    float *dw = V_(dwte), *dp = V_(dwpe);
    const float *d = CV_(dout);
    const int32_t *tok = device_host_view(dev, tokens);
    TRY(check_tokens_("embed_backward", tok, B, T, V));
    // dwte: kernel_embed_backward_wte's chains, position by position (each
    // element's terms in (b, t) order onto its old value).
    for (size_t bt = 0; bt < (size_t)B * T; bt++) {
        float *row = dw + (size_t)tok[bt] * C;
        const float *g = d + bt * C;
        for (size_t c = 0; c < (size_t)C; c++)
            row[c] += g[c];
    }
    for (size_t i = 0; i < (size_t)T * C; i++)
        kernel_embed_backward_wpe(i, dp, d, B, T, C);
    return 0;
}

static int cpu_layernorm_forward_(device_t *dev, float *out, float *mean, float *rstd,
                                  const float *inp, const float *weight, const float *bias,
                                  int rows, int C)
{
    float *o = V_(out), *m = V_(mean), *s = V_(rstd);
    const float *x = CV_(inp), *w = CV_(weight), *b = CV_(bias);
    for (size_t r = 0; r < (size_t)rows; r++)
        kernel_layernorm_forward(r, o, m, s, x, w, b, C);
    return 0;
}

static int cpu_layernorm_backward_(device_t *dev, float *dinp, float *dweight, float *dbias,
                                   const float *dout, const float *inp, const float *weight,
                                   const float *mean, const float *rstd, int rows, int C)
{
    float *dx = V_(dinp), *dw = V_(dweight), *db = V_(dbias);
    const float *dy = CV_(dout), *x = CV_(inp), *w = CV_(weight), *m = CV_(mean),
                *s = CV_(rstd);
    for (size_t r = 0; r < (size_t)rows; r++)
        kernel_layernorm_backward_row(r, dx, dy, x, w, m, s, C);
    // kernel_layernorm_backward_param's sums, row by row (contiguous): each
    // column's terms in row order onto its old value.
    for (size_t r = 0; r < (size_t)rows; r++) {
        const float *xr = x + r * C, *dyr = dy + r * C, mr = m[r], sr = s[r];
        for (size_t c = 0; c < (size_t)C; c++) {
            dw[c] += (xr[c] - mr) * sr * dyr[c];
            db[c] += dyr[c];
        }
    }
    return 0;
}

// ---- vector math: glibc's libmvec with AVX-512 ----
// The scalar loops call libm's expf and tanhf one element at a time (a
// third of a GPT step went to GELU's tanhf on the benchmark's CPU); libmvec
// gives 16 expf a call. Not bitwise libm's: within libmvec's few ulp.
#if defined(VGPU_HAVE_LIBMVEC) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define CPU_VMATH_ 1
#define AVX512_FN_ __attribute__((target("avx512f")))

// libmvec's AVX-512 expf (the x86_64 vector ABI's name).
#pragma GCC push_options
#pragma GCC target("avx512f")
__m512 _ZGVeN16v_expf(__m512 x);
#pragma GCC pop_options

// The lanes holding elements when `left` remain.
AVX512_FN_ static inline __mmask16 lanes_(size_t left)
{
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

// kernel_attention_softmax's steps on a row of n scores, 16 lanes at a time:
// scaled, the max subtracted, exponentiated, normalised (the max and the sum
// lane by lane, then across the lanes).
AVX512_FN_ static void softmax_row_avx512_(float *row, size_t n, float scale)
{
    const __m512 vs = _mm512_set1_ps(scale);
    __m512 vmax = _mm512_set1_ps(-INFINITY), vsum = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = lanes_(n - i);
        const __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + i), vs);
        _mm512_mask_storeu_ps(row + i, m, s);
        vmax = _mm512_mask_max_ps(vmax, m, vmax, s);
    }
    const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = lanes_(n - i);
        const __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, row + i), mx));
        _mm512_mask_storeu_ps(row + i, m, e);
        vsum = _mm512_mask_add_ps(vsum, m, vsum, e);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = lanes_(n - i);
        _mm512_mask_storeu_ps(row + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + i), inv));
    }
}

// kernel_attention_backward_q's datt row on n entries: da = a * (da - sum(a * da)).
AVX512_FN_ static void dsoftmax_row_avx512_(float *da, const float *a, size_t n)
{
    __m512 vdot = _mm512_setzero_ps();
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = lanes_(n - i);
        vdot = _mm512_add_ps(vdot, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i),
                                                 _mm512_maskz_loadu_ps(m, da + i)));
    }
    const __m512 dot = _mm512_set1_ps(_mm512_reduce_add_ps(vdot));
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = lanes_(n - i);
        const __m512 p = _mm512_maskz_loadu_ps(m, da + i);
        _mm512_mask_storeu_ps(da + i, m,
                              _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_sub_ps(p, dot)));
    }
}

// GELU through one expf: 0.5 (1 + tanh u) = s = 1 / (1 + e), e = exp(-2u),
// and 1 - tanh^2 u = 4 e s^2, which does not cancel where tanh u is near
// -+1 (libmvec's tanhf one ulp off there made 1 - th^2 0.1% of a small
// gradient; this is closer to the double reference than libm's tanhf, and
// faster: 0.38 ns an element against libmvec tanhf's 0.48, libm's 13).
// -2u is kept below 88 so that e stays finite (s is then 6e-39, not 0).
AVX512_FN_ static inline __m512 gelu_e_(__m512 x, __m512 *s)
{
    const __m512 k2 = _mm512_set1_ps(-2.0f * MATH_GELU_K), a = _mm512_set1_ps(MATH_GELU_A),
                 hi = _mm512_set1_ps(88.0f);
    const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(a, x), x), x);
    const __m512 e = _ZGVeN16v_expf(_mm512_min_ps(_mm512_mul_ps(k2, _mm512_add_ps(x, x3)), hi));
    *s = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    return e;
}

// out = x * s (kernel_gelu_forward's 0.5 x (1 + tanh u)), 16 lanes at a time.
AVX512_FN_ static void gelu_forward_avx512_(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = lanes_(n - i);
        const __m512 x = _mm512_maskz_loadu_ps(m, inp + i);
        __m512 s;
        gelu_e_(x, &s);
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(x, s));
    }
}

// dinp = dout * (s + 2 x e s^2 du) (kernel_gelu_backward's 0.5 (1 + th) +
// 0.5 x (1 - th^2) du), du = sqrt(2 / pi) (1 + 3 * 0.044715 x^2).
AVX512_FN_ static void gelu_backward_avx512_(float *dinp, const float *inp, const float *dout,
                                             size_t n)
{
    const __m512 k = _mm512_set1_ps(MATH_GELU_K), a3 = _mm512_set1_ps(3.0f * MATH_GELU_A),
                 one = _mm512_set1_ps(1.0f), two = _mm512_set1_ps(2.0f);
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = lanes_(n - i);
        const __m512 x = _mm512_maskz_loadu_ps(m, inp + i);
        __m512 s;
        const __m512 e = gelu_e_(x, &s);
        const __m512 du =
            _mm512_mul_ps(k, _mm512_add_ps(one, _mm512_mul_ps(_mm512_mul_ps(a3, x), x)));
        const __m512 sech2_2 = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(two, e), s), s);
        const __m512 g = _mm512_add_ps(s, _mm512_mul_ps(_mm512_mul_ps(x, sech2_2), du));
        _mm512_mask_storeu_ps(dinp + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, dout + i), g));
    }
}

static int vmath_ok_(void) { return __builtin_cpu_supports("avx512f"); }
#endif

// ---- causal self-attention on the BLAS ----
// Per (batch row, head): Q, K, V are T x hs slices of qkv (row stride 3C),
// so each product is one strided GEMM. The full T x T products are taken;
// the causal mask is applied to the rows after (entries above the diagonal
// are 0 in att and datt, so the products that follow add nothing from
// them). Products of only the causal window's row blocks (62% of the work
// at T 128) measured no faster on bench_gpt.sh's shapes: not kept. Each sum runs in the BLAS's order, not the element functions':
// equal to rounding (tests/test_math_transformer.c), deterministic.

// Row of T scores, n = t + 1 of them in the causal window: softmax(scale *
// scores) over those, 0 after.
static void softmax_row_(float *row, size_t n, size_t T, float scale)
{
#ifdef CPU_VMATH_
    if (vmath_ok_())
        softmax_row_avx512_(row, n, scale);
    else
#endif
    {
        float max = -INFINITY, sum = 0.0f;
        for (size_t i = 0; i < n; i++) {
            row[i] *= scale;
            max = row[i] > max ? row[i] : max;
        }
        for (size_t i = 0; i < n; i++)
            sum += row[i] = expf(row[i] - max);
        const float inv = 1.0f / sum;
        for (size_t i = 0; i < n; i++)
            row[i] *= inv;
    }
    for (size_t i = n; i < T; i++)
        row[i] = 0.0f;
}

// datt row: da = a * (da - sum(a * da)) over the n = t + 1 causal entries, 0 after.
static void dsoftmax_row_(float *da, const float *a, size_t n, size_t T)
{
#ifdef CPU_VMATH_
    if (vmath_ok_())
        dsoftmax_row_avx512_(da, a, n);
    else
#endif
    {
        float dot = 0.0f;
        for (size_t i = 0; i < n; i++)
            dot += a[i] * da[i];
        for (size_t i = 0; i < n; i++)
            da[i] = a[i] * (da[i] - dot);
    }
    for (size_t i = n; i < T; i++)
        da[i] = 0.0f;
}

// att = softmax(Q K^T * scale) (causal), out = att V; per (b, h).
static int cpu_attention_forward_(device_t *dev, float *out, float *att, const float *qkv, int B,
                                  int T, int C, int NH)
{
    math_cpu_prepare(dev);
    float *o = V_(out), *a = V_(att);
    const float *x = CV_(qkv);
    const int hs = C / NH, C3 = 3 * C;
    const float scale = kernel_attention_scale(hs);
    for (size_t b = 0; b < (size_t)B; b++)
        for (size_t h = 0; h < (size_t)NH; h++) {
            const float *q = x + b * T * C3 + h * hs, *k = q + C, *v = q + 2 * (size_t)C;
            float *s = a + (b * NH + h) * T * T;
            TRY(cpu_gemm_ld(0, 1, T, T, hs, 1.0f, q, C3, k, C3, 0.0f, s, T));
            for (size_t t = 0; t < (size_t)T; t++)
                softmax_row_(s + t * T, t + 1, T, scale);
            TRY(cpu_gemm_ld(0, 0, T, hs, T, 1.0f, s, T, v, C3, 0.0f, o + b * T * C + h * hs, C));
        }
    return 0;
}

// datt = P * (dY V^T - rowsum) (causal), dQ = scale * datt K, dK = scale *
// datt^T Q, dV = P^T dY: dqkv overwritten (beta 0), per (b, h).
static int cpu_attention_backward_(device_t *dev, float *dqkv, float *datt, const float *dout,
                                   const float *qkv, const float *att, int B, int T, int C,
                                   int NH)
{
    math_cpu_prepare(dev);
    float *dx = V_(dqkv), *da = V_(datt);
    const float *dy = CV_(dout), *x = CV_(qkv), *a = CV_(att);
    const int hs = C / NH, C3 = 3 * C;
    const float scale = kernel_attention_scale(hs);
    for (size_t b = 0; b < (size_t)B; b++)
        for (size_t h = 0; h < (size_t)NH; h++) {
            const size_t qo = b * T * C3 + h * hs, ao = (b * NH + h) * T * T;
            const float *q = x + qo, *k = q + C, *v = q + 2 * (size_t)C, *p = a + ao;
            const float *g = dy + b * T * C + h * hs;
            float *dq = dx + qo, *dk = dq + C, *dv = dq + 2 * (size_t)C, *ds = da + ao;
            TRY(cpu_gemm_ld(0, 1, T, T, hs, 1.0f, g, C, v, C3, 0.0f, ds, T));
            for (size_t t = 0; t < (size_t)T; t++)
                dsoftmax_row_(ds + t * T, p + t * T, t + 1, T);
            TRY(cpu_gemm_ld(0, 0, T, hs, T, scale, ds, T, k, C3, 0.0f, dq, C3));
            TRY(cpu_gemm_ld(1, 0, T, hs, T, scale, ds, T, q, C3, 0.0f, dk, C3));
            TRY(cpu_gemm_ld(1, 0, T, hs, T, 1.0f, p, T, g, C, 0.0f, dv, C3));
        }
    return 0;
}

// ---- GELU ----

static int cpu_gelu_forward_(device_t *dev, float *out, const float *inp, size_t n)
{
    float *o = V_(out);
    const float *x = CV_(inp);
#ifdef CPU_VMATH_
    if (vmath_ok_()) {
        gelu_forward_avx512_(o, x, n);
        return 0;
    }
#endif
    for (size_t i = 0; i < n; i++)
        kernel_gelu_forward(i, o, x);
    return 0;
}

static int cpu_gelu_backward_(device_t *dev, float *dinp, const float *inp, const float *dout,
                              size_t n)
{
    float *dx = V_(dinp);
    const float *x = CV_(inp), *dy = CV_(dout);
#ifdef CPU_VMATH_
    if (vmath_ok_()) {
        gelu_backward_avx512_(dx, x, dy, n);
        return 0;
    }
#endif
    for (size_t i = 0; i < n; i++)
        kernel_gelu_backward(i, dx, x, dy);
    return 0;
}

// ---- a sequence's figures ----

static int cpu_seq_stats_(device_t *dev, float *out, const float *xent, int B, int T)
{
    float *o = V_(out);
    const float *x = CV_(xent);
    for (size_t b = 0; b < (size_t)B; b++)
        kernel_seq_stats(b, o, x, T);
    return 0;
}

const struct math_transformer_ops math_cpu_transformer_ops = {
    .embed_forward = cpu_embed_forward_,
    .embed_backward = cpu_embed_backward_,
    .layernorm_forward = cpu_layernorm_forward_,
    .layernorm_backward = cpu_layernorm_backward_,
    .attention_forward = cpu_attention_forward_,
    .attention_backward = cpu_attention_backward_,
    .gelu_forward = cpu_gelu_forward_,
    .gelu_backward = cpu_gelu_backward_,
    .seq_stats = cpu_seq_stats_,
};

