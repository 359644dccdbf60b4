// math_transformer.h: a GPT-2-style transformer's operations (token and
// position embeddings, layer norm, causal self-attention, GELU), a family of
// math_ops.h (which includes this at its end: include math_ops.h). Here: the
// family's table (struct math_transformer_ops; a backend's is its math_ops'
// .transformer) and each operation's contract, element functions and checked
// entry, which calls through that table. A new transformer operation is 3
// files: its member, element function and entry here, and a body and a row of
// math_transformer_ops in cpu/cpu_transformer.c and in cuda/math_cuda.cu.
//
// Sizes: B batch rows, T positions, C channels, NH heads of hs = C / NH
// channels, V vocabulary. Tensors are float32, row-major, device memory of
// dev. A gradient that "accumulates" adds onto what its buffer holds (+=);
// the others are overwritten. Every sum runs in a fixed order, so a result is
// bitwise the same every run, on the GPU too (no float atomics); the CPU and
// a GPU agree bitwise where only +, *, / and sqrt are involved (embeddings,
// layer norm), and to rounding elsewhere: the CPU takes attention's products
// from the BLAS (its order of the sums), and computes GELU's tanh through
// one expf and takes that and the softmax's expf from glibc's libmvec where
// it can (cpu/cpu_transformer.c).
#ifndef VGPU_MATH_TRANSFORMER_H
#define VGPU_MATH_TRANSFORMER_H

#ifndef VGPU_MATH_H
#error "include math_ops.h, which includes math_transformer.h"
#endif

// The family's bodies: one table a backend, every member set (the entries
// call them unchecked).
struct math_transformer_ops {
    int (*embed_forward)(device_t *dev, float *out, const int32_t *tokens, const float *wte,
                         const float *wpe, int B, int T, int C, int V);
    int (*embed_backward)(device_t *dev, float *dwte, float *dwpe, const float *dout,
                          const int32_t *tokens, int B, int T, int C, int V);
    int (*layernorm_forward)(device_t *dev, float *out, float *mean, float *rstd,
                             const float *inp, const float *weight, const float *bias, int rows,
                             int C);
    int (*layernorm_backward)(device_t *dev, float *dinp, float *dweight, float *dbias,
                              const float *dout, const float *inp, const float *weight,
                              const float *mean, const float *rstd, int rows, int C);
    int (*attention_forward)(device_t *dev, float *out, float *att, const float *qkv, int B,
                             int T, int C, int NH);
    int (*attention_backward)(device_t *dev, float *dqkv, float *datt, const float *dout,
                              const float *qkv, const float *att, int B, int T, int C, int NH);
    int (*gelu_forward)(device_t *dev, float *out, const float *inp, size_t n);
    int (*gelu_backward)(device_t *dev, float *dinp, const float *inp, const float *dout,
                         size_t n);
    int (*seq_stats)(device_t *dev, float *out, const float *xent, int B, int T);
};

// ---- embeddings ----

// Sizes the embeddings take: none negative, a vocabulary, and B * T
// positions an int32 can number (the GPU chains positions by index).
static inline int math_embed_sizes_(const char *op, int B, int T, int C, int V)
{
    if (B < 0 || T < 0 || C < 0 || V < 1 || (int64_t)B * T > INT32_MAX) {
        log_error("%s: bad sizes B %d, T %d, C %d, V %d (none negative, V >= 1, B * T < 2^31)",
                  op, B, T, C, V);
        return VGPU_EINVAL;
    }
    return 0;
}

KERNEL_FN int kernel_token_ok(int32_t token, int V) { return token >= 0 && token < V; }

// Element c of position bt = b * T + t: its token's row of wte plus row t of
// wpe. The caller has checked the token.
KERNEL_FN void kernel_embed_forward(size_t bt, size_t c, float *out, const int32_t *tokens,
                                    const float *wte, const float *wpe, int T, int C)
{
    size_t t = bt % (size_t)T;
    out[bt * C + c] = wte[(size_t)tokens[bt] * C + c] + wpe[t * C + c];
}

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; tokens [B, T] int32, wte [V, C],
// wpe [T, C], out [B, T, C]. A token outside [0, V) gives VGPU_EINVAL, said
// when the call returns (on a GPU too, as softmax_xent's labels: one wait
// for the stream a call); out is then unspecified.
static inline int math_embed_forward(device_t *dev, float *out, const int32_t *tokens,
                                     const float *wte, const float *wpe, int B, int T, int C,
                                     int V)
{
    TRY(math_embed_sizes_("embed_forward", B, T, C, V));
    size_t bt = (size_t)B * T;
    if (!bt || !C)
        return 0;
    MATH_DEV_(out, bt * C * MATH_F_, "out", "embed_forward");
    MATH_DEV_(tokens, bt * sizeof(int32_t), "tokens", "embed_forward");
    MATH_DEV_(wte, (size_t)V * C * MATH_F_, "wte", "embed_forward");
    MATH_DEV_(wpe, (size_t)T * C * MATH_F_, "wpe", "embed_forward");
    MATH_FAMILY_CALL_(transformer, embed_forward, out, tokens, wte, wpe, B, T, C, V);
}

// Element i = t * C + c of dwpe, accumulated: dout[b, t, c] for b = 0, 1, ...
KERNEL_FN void kernel_embed_backward_wpe(size_t i, float *dwpe, const float *dout, int B, int T,
                                         int C)
{
    float acc = dwpe[i];
    for (size_t b = 0; b < (size_t)B; b++)
        acc += dout[b * T * C + i];
    dwpe[i] = acc;
}

// dwte without atomics (the GPU's way): the positions of one token form a
// chain in (b, t) order, next[bt] the next position with bt's token (-1 at
// the end), and the chain's first position (has_prev 0) sums it. Builds
// bt's link and marks its successor (has_prev zeroed before); 0 when bt's
// token is out of range (no link), else 1.
KERNEL_FN int kernel_embed_link(size_t bt, int32_t *next, uint8_t *has_prev,
                                const int32_t *tokens, size_t positions, int V)
{
    int32_t token = tokens[bt];
    next[bt] = -1;
    if (!kernel_token_ok(token, V))
        return 0;
    for (size_t p = bt + 1; p < positions; p++)
        if (tokens[p] == token) {
            next[bt] = (int32_t)p;
            has_prev[p] = 1;
            break;
        }
    return 1;
}

// Element c of the token of first position bt, accumulated: dout[p, c] for
// p along its chain, in order (as adding dout's rows position by position).
KERNEL_FN void kernel_embed_backward_wte(size_t bt, size_t c, float *dwte, const float *dout,
                                         const int32_t *tokens, const int32_t *next, int C)
{
    float *w = dwte + (size_t)tokens[bt] * C + c;
    float acc = *w;
    for (int32_t p = (int32_t)bt; p >= 0; p = next[p])
        acc += dout[(size_t)p * C + c];
    *w = acc;
}

// Accumulates dwte[tokens[b,t],:] += dout[b,t,:] and dwpe[t,:] += dout[b,t,:]
// (dwte [V, C], dwpe [T, C], dout [B, T, C]); each element adds its terms in
// (b, t) order onto its old value. A token outside [0, V) gives VGPU_EINVAL,
// said when the call returns, with nothing written.
static inline int math_embed_backward(device_t *dev, float *dwte, float *dwpe, const float *dout,
                                      const int32_t *tokens, int B, int T, int C, int V)
{
    TRY(math_embed_sizes_("embed_backward", B, T, C, V));
    size_t bt = (size_t)B * T;
    if (!bt || !C)
        return 0;
    MATH_DEV_(dwte, (size_t)V * C * MATH_F_, "dwte", "embed_backward");
    MATH_DEV_(dwpe, (size_t)T * C * MATH_F_, "dwpe", "embed_backward");
    MATH_DEV_(dout, bt * C * MATH_F_, "dout", "embed_backward");
    MATH_DEV_(tokens, bt * sizeof(int32_t), "tokens", "embed_backward");
    MATH_FAMILY_CALL_(transformer, embed_backward, dwte, dwpe, dout, tokens, B, T, C, V);
}

// ---- layer norm: PyTorch's LayerNorm (biased variance, eps inside the root) ----

#define MATH_LN_EPS 1e-5f

static inline int math_layernorm_sizes_(const char *op, int rows, int C)
{
    if (rows < 0 || C < 1) {
        log_error("%s: bad sizes rows %d, C %d (rows >= 0, C >= 1)", op, rows, C);
        return VGPU_EINVAL;
    }
    return 0;
}

// Row `row`: its mean and rstd = 1 / sqrt(var + eps) (two passes, float),
// out = (x - mean) * rstd * weight + bias.
KERNEL_FN void kernel_layernorm_forward(size_t row, float *out, float *mean, float *rstd,
                                        const float *inp, const float *weight, const float *bias,
                                        int C)
{
    const float *x = inp + row * C;
    float *o = out + row * C;
    float m = 0.0f, var = 0.0f;
    for (int c = 0; c < C; c++)
        m += x[c];
    m /= (float)C;
    for (int c = 0; c < C; c++) {
        float d = x[c] - m;
        var += d * d;
    }
    var /= (float)C;
    float s = 1.0f / sqrtf(var + MATH_LN_EPS);
    for (int c = 0; c < C; c++)
        o[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[row] = m;
    rstd[row] = s;
}

// out = layernorm(inp) * weight + bias per row of inp [rows, C] (weight,
// bias [C]); mean [rows] and rstd [rows] = 1 / sqrt(var + 1e-5) are kept for
// the backward pass.
static inline int math_layernorm_forward(device_t *dev, float *out, float *mean, float *rstd,
                                         const float *inp, const float *weight, const float *bias,
                                         int rows, int C)
{
    TRY(math_layernorm_sizes_("layernorm_forward", rows, C));
    if (!rows)
        return 0;
    size_t n = (size_t)rows * C * MATH_F_;
    MATH_DEV_(out, n, "out", "layernorm_forward");
    MATH_DEV_(mean, (size_t)rows * MATH_F_, "mean", "layernorm_forward");
    MATH_DEV_(rstd, (size_t)rows * MATH_F_, "rstd", "layernorm_forward");
    MATH_DEV_(inp, n, "inp", "layernorm_forward");
    MATH_DEV_(weight, (size_t)C * MATH_F_, "weight", "layernorm_forward");
    MATH_DEV_(bias, (size_t)C * MATH_F_, "bias", "layernorm_forward");
    MATH_FAMILY_CALL_(transformer, layernorm_forward, out, mean, rstd, inp, weight, bias, rows, C);
}

// Row `row` of dinp, accumulated: with n = (x - mean) * rstd and g = weight
// * dout, dinp += (g - mean(g) - n * mean(g * n)) * rstd.
KERNEL_FN void kernel_layernorm_backward_row(size_t row, float *dinp, const float *dout,
                                             const float *inp, const float *weight,
                                             const float *mean, const float *rstd, int C)
{
    const float *x = inp + row * C, *dy = dout + row * C;
    float *dx = dinp + row * C;
    const float m = mean[row], s = rstd[row];
    float g_mean = 0.0f, gn_mean = 0.0f;
    for (int c = 0; c < C; c++) {
        float g = weight[c] * dy[c];
        g_mean += g;
        gn_mean += g * ((x[c] - m) * s);
    }
    g_mean /= (float)C;
    gn_mean /= (float)C;
    for (int c = 0; c < C; c++) {
        float g = weight[c] * dy[c];
        dx[c] += (g - g_mean - (x[c] - m) * s * gn_mean) * s;
    }
}

// Column c of dweight and dbias, accumulated over rows in order:
// dweight[c] += n[r, c] * dout[r, c], dbias[c] += dout[r, c].
KERNEL_FN void kernel_layernorm_backward_param(size_t c, float *dweight, float *dbias,
                                               const float *dout, const float *inp,
                                               const float *mean, const float *rstd, int rows,
                                               int C)
{
    float dw = dweight[c], db = dbias[c];
    for (size_t r = 0; r < (size_t)rows; r++) {
        size_t i = r * C + c;
        dw += (inp[i] - mean[r]) * rstd[r] * dout[i];
        db += dout[i];
    }
    dweight[c] = dw;
    dbias[c] = db;
}

// Accumulates the gradients of layernorm_forward: dinp [rows, C] += (the
// residual stream's gradient), dweight [C] += and dbias [C] += (rows added
// in order); mean and rstd are the forward pass's.
static inline int math_layernorm_backward(device_t *dev, float *dinp, float *dweight,
                                          float *dbias, const float *dout, const float *inp,
                                          const float *weight, const float *mean,
                                          const float *rstd, int rows, int C)
{
    TRY(math_layernorm_sizes_("layernorm_backward", rows, C));
    if (!rows)
        return 0;
    size_t n = (size_t)rows * C * MATH_F_, c = (size_t)C * MATH_F_, r = (size_t)rows * MATH_F_;
    MATH_DEV_(dinp, n, "dinp", "layernorm_backward");
    MATH_DEV_(dweight, c, "dweight", "layernorm_backward");
    MATH_DEV_(dbias, c, "dbias", "layernorm_backward");
    MATH_DEV_(dout, n, "dout", "layernorm_backward");
    MATH_DEV_(inp, n, "inp", "layernorm_backward");
    MATH_DEV_(weight, c, "weight", "layernorm_backward");
    MATH_DEV_(mean, r, "mean", "layernorm_backward");
    MATH_DEV_(rstd, r, "rstd", "layernorm_backward");
    MATH_FAMILY_CALL_(transformer, layernorm_backward, dinp, dweight, dbias, dout, inp, weight,
                      mean, rstd, rows, C);
}

// ---- causal self-attention ----
// qkv [B, T, 3C]: a position's query in columns [0, C), key in [C, 2C), value
// in [2C, 3C), head h in channels [h * hs, (h + 1) * hs) of each. att and
// datt [B, NH, T, T]: row r = (b * NH + h) * T + t is what position t of
// head h of batch row b attends to.

static inline int math_attention_sizes_(const char *op, int B, int T, int C, int NH)
{
    if (B < 0 || T < 0 || C < 0 || NH < 1 || C % NH) {
        log_error("%s: bad sizes B %d, T %d, C %d, NH %d (none negative, C a multiple of NH)",
                  op, B, T, C, NH);
        return VGPU_EINVAL;
    }
    return 0;
}

// The scores' scale, 1 / sqrt(hs).
KERNEL_FN float kernel_attention_scale(int hs) { return 1.0f / sqrtf((float)hs); }

// Row r of att: softmax over t2 <= t of (q_t . k_t2) * scale, the row max
// subtracted; 0 for t2 > t.
KERNEL_FN void kernel_attention_softmax(size_t r, float *att, const float *qkv, int T, int C,
                                        int NH)
{
    const size_t hs = (size_t)(C / NH), C3 = 3 * (size_t)C, t = r % (size_t)T;
    const size_t b = r / T / NH, h = r / T % NH;
    const float *q = qkv + (b * T + t) * C3 + h * hs, *k0 = qkv + b * T * C3 + C + h * hs;
    float *a = att + r * T;
    const float scale = kernel_attention_scale((int)hs);
    float max = -INFINITY, sum = 0.0f;
    for (size_t t2 = 0; t2 <= t; t2++) {
        const float *k = k0 + t2 * C3;
        float s = 0.0f;
        for (size_t d = 0; d < hs; d++)
            s += q[d] * k[d];
        s *= scale;
        a[t2] = s;
        max = s > max ? s : max;
    }
    for (size_t t2 = 0; t2 <= t; t2++) {
        float e = expf(a[t2] - max);
        a[t2] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
    for (size_t t2 = 0; t2 <= t; t2++)
        a[t2] *= inv;
    for (size_t t2 = t + 1; t2 < (size_t)T; t2++)
        a[t2] = 0.0f;
}

// Element i = (b * T + t) * C + c of out (c in head h): the sum over t2 <= t,
// in order, of att[b, h, t, t2] * v_t2[c].
KERNEL_FN void kernel_attention_out(size_t i, float *out, const float *att, const float *qkv,
                                    int T, int C, int NH)
{
    const size_t C3 = 3 * (size_t)C, c = i % C, bt = i / C, t = bt % T, b = bt / T;
    const size_t h = c / (size_t)(C / NH);
    const float *a = att + ((b * NH + h) * T + t) * T, *v = qkv + b * T * C3 + 2 * (size_t)C + c;
    float acc = 0.0f;
    for (size_t t2 = 0; t2 <= t; t2++)
        acc += a[t2] * v[t2 * C3];
    out[i] = acc;
}

// out [B, T, C] = att @ v per head, heads side by side; att [B, NH, T, T]
// holds the causal softmax of q . k / sqrt(hs) (0 above the diagonal,
// written). C % NH != 0 gives VGPU_EINVAL.
static inline int math_attention_forward(device_t *dev, float *out, float *att, const float *qkv,
                                         int B, int T, int C, int NH)
{
    TRY(math_attention_sizes_("attention_forward", B, T, C, NH));
    size_t bt = (size_t)B * T;
    if (!bt || !C)
        return 0;
    MATH_DEV_(out, bt * C * MATH_F_, "out", "attention_forward");
    MATH_DEV_(att, bt * NH * T * MATH_F_, "att", "attention_forward");
    MATH_DEV_(qkv, bt * 3 * C * MATH_F_, "qkv", "attention_forward");
    // Its two products over the positions each sees (causal: t + 1), a
    // multiply-add counting 2, as the model's FLOP count has them.
    MATH_FAMILY_CALL_FLOPS_(TRACE_OP_GEMM, 2 * (uint64_t)B * T * (T + 1) * C, transformer,
                            attention_forward, out, att, qkv, B, T, C, NH);
}

// Row r's first part of the backward pass: datt row r = the gradient wrt the
// scaled scores, att * (p - sum(att * p)) with p[t2] = dout_t . v_t2 (0 for
// t2 > t); then dq_t = scale * sum over t2 <= t, in order, of datt * k_t2,
// written into dqkv.
KERNEL_FN void kernel_attention_backward_q(size_t r, float *dqkv, float *datt, const float *dout,
                                           const float *qkv, const float *att, int T, int C,
                                           int NH)
{
    const size_t hs = (size_t)(C / NH), C3 = 3 * (size_t)C, t = r % (size_t)T;
    const size_t b = r / T / NH, h = r / T % NH;
    const float *dy = dout + (b * T + t) * C + h * hs, *a = att + r * T;
    const float *k0 = qkv + b * T * C3 + C + h * hs, *v0 = k0 + C;
    float *da = datt + r * T, *dq = dqkv + (b * T + t) * C3 + h * hs;
    float dot = 0.0f;
    for (size_t t2 = 0; t2 <= t; t2++) {
        const float *v = v0 + t2 * C3;
        float p = 0.0f;
        for (size_t d = 0; d < hs; d++)
            p += dy[d] * v[d];
        da[t2] = p;
        dot += a[t2] * p;
    }
    for (size_t t2 = 0; t2 <= t; t2++)
        da[t2] = a[t2] * (da[t2] - dot);
    for (size_t t2 = t + 1; t2 < (size_t)T; t2++)
        da[t2] = 0.0f;
    for (size_t d = 0; d < hs; d++)
        dq[d] = 0.0f;
    for (size_t t2 = 0; t2 <= t; t2++) {
        const float *k = k0 + t2 * C3;
        const float g = da[t2];
        for (size_t d = 0; d < hs; d++)
            dq[d] += g * k[d];
    }
    const float scale = kernel_attention_scale((int)hs);
    for (size_t d = 0; d < hs; d++)
        dq[d] *= scale;
}

// Element i = (b * T + t2) * C + c of dk and dv (c in head h), written into
// dqkv, from every datt row (a pass after kernel_attention_backward_q's):
// dk = scale * the sum over t >= t2, in order, of datt[b, h, t, t2] * q_t[c];
// dv = the sum over t >= t2 of att[b, h, t, t2] * dout_t[c].
KERNEL_FN void kernel_attention_backward_kv(size_t i, float *dqkv, const float *datt,
                                            const float *dout, const float *qkv,
                                            const float *att, int T, int C, int NH)
{
    const size_t C3 = 3 * (size_t)C, c = i % C, bt = i / C, t2 = bt % T, b = bt / T;
    const size_t hs = (size_t)(C / NH), h = c / hs;
    const size_t col = (b * NH + h) * T * T + t2; // [b, h, 0, t2]
    float dk = 0.0f, dv = 0.0f;
    for (size_t t = t2; t < (size_t)T; t++) {
        dk += datt[col + t * T] * qkv[(b * T + t) * C3 + c];
        dv += att[col + t * T] * dout[(b * T + t) * C + c];
    }
    dqkv[bt * C3 + C + c] = dk * kernel_attention_scale((int)hs);
    dqkv[bt * C3 + 2 * (size_t)C + c] = dv;
}

// dqkv [B, T, 3C] = the gradient of attention_forward wrt qkv (overwritten),
// from dout [B, T, C] and the forward pass's att; datt [B, NH, T, T] is
// scratch the caller provides. C % NH != 0 gives VGPU_EINVAL.
static inline int math_attention_backward(device_t *dev, float *dqkv, float *datt,
                                          const float *dout, const float *qkv, const float *att,
                                          int B, int T, int C, int NH)
{
    TRY(math_attention_sizes_("attention_backward", B, T, C, NH));
    size_t bt = (size_t)B * T;
    if (!bt || !C)
        return 0;
    size_t n3 = bt * 3 * C * MATH_F_, natt = bt * NH * T * MATH_F_;
    MATH_DEV_(dqkv, n3, "dqkv", "attention_backward");
    MATH_DEV_(datt, natt, "datt", "attention_backward");
    MATH_DEV_(dout, bt * C * MATH_F_, "dout", "attention_backward");
    MATH_DEV_(qkv, n3, "qkv", "attention_backward");
    MATH_DEV_(att, natt, "att", "attention_backward");
    MATH_FAMILY_CALL_FLOPS_(TRACE_OP_GEMM, 4 * (uint64_t)B * T * (T + 1) * C, transformer,
                            attention_backward, dqkv, datt, dout, qkv, att, B, T, C, NH);
}

// ---- GELU, the tanh approximation (PyTorch's approximate='tanh') ----

#define MATH_GELU_K 0.7978845608028654f // sqrt(2 / pi)
#define MATH_GELU_A 0.044715f

// 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3).
KERNEL_FN void kernel_gelu_forward(size_t i, float *out, const float *inp)
{
    float x = inp[i];
    float u = MATH_GELU_K * (x + MATH_GELU_A * x * x * x);
    out[i] = 0.5f * x * (1.0f + tanhf(u));
}

// dout * gelu'(x), PyTorch's arrangement: 0.5 (1 + tanh u) + 0.5 x (1 -
// tanh^2 u) du/dx, du/dx = sqrt(2 / pi) (1 + 3 * 0.044715 x^2).
KERNEL_FN void kernel_gelu_backward(size_t i, float *dinp, const float *inp, const float *dout)
{
    float x = inp[i];
    float th = tanhf(MATH_GELU_K * (x + MATH_GELU_A * x * x * x));
    float du = MATH_GELU_K * (1.0f + 3.0f * MATH_GELU_A * x * x);
    float g = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
    dinp[i] = dout[i] * g;
}

// out[i] = gelu(inp[i]) for i < n; out may equal inp.
static inline int math_gelu_forward(device_t *dev, float *out, const float *inp, size_t n)
{
    if (!n)
        return 0;
    MATH_DEV_(out, n * MATH_F_, "out", "gelu_forward");
    MATH_DEV_(inp, n * MATH_F_, "inp", "gelu_forward");
    MATH_FAMILY_CALL_(transformer, gelu_forward, out, inp, n);
}

// dinp[i] = dout[i] * gelu'(inp[i]) (overwritten) for i < n; dinp may equal dout.
static inline int math_gelu_backward(device_t *dev, float *dinp, const float *inp,
                                     const float *dout, size_t n)
{
    if (!n)
        return 0;
    MATH_DEV_(dinp, n * MATH_F_, "dinp", "gelu_backward");
    MATH_DEV_(inp, n * MATH_F_, "inp", "gelu_backward");
    MATH_DEV_(dout, n * MATH_F_, "dout", "gelu_backward");
    MATH_FAMILY_CALL_(transformer, gelu_backward, dinp, inp, dout, n);
}

// ---- a sequence's figures ----

// Row b of out: the sums over its T positions of softmax_xent's per-position
// stats (loss, top-1, top-5: xent [B*T, XENT_STATS]), in position order, then
// T itself (a figure's divisor: per position, whatever the context).
#define MATH_SEQ_STATS (XENT_STATS + 1)
KERNEL_FN void kernel_seq_stats(size_t b, float *out, const float *xent, int T)
{
    float sums[XENT_STATS] = {0.0f, 0.0f, 0.0f};
    const float *x = xent + b * (size_t)T * XENT_STATS;
    for (int t = 0; t < T; t++)
        for (int k = 0; k < XENT_STATS; k++)
            sums[k] += x[(size_t)t * XENT_STATS + k];
    for (int k = 0; k < XENT_STATS; k++)
        out[b * MATH_SEQ_STATS + k] = sums[k];
    out[b * MATH_SEQ_STATS + XENT_STATS] = (float)T;
}

// out [B, MATH_SEQ_STATS]: each sequence's summed stats (kernel_seq_stats).
static inline int math_seq_stats(device_t *dev, float *out, const float *xent, int B, int T)
{
    if (B < 0 || T < 1)
        return VGPU_EINVAL;
    if (B == 0)
        return 0;
    MATH_DEV_(out, (size_t)B * MATH_SEQ_STATS * MATH_F_, "out", "seq_stats");
    MATH_DEV_(xent, (size_t)B * T * XENT_STATS * MATH_F_, "xent", "seq_stats");
    MATH_FAMILY_CALL_(transformer, seq_stats, out, xent, B, T);
}

#endif
