// math_ops.h: the operations a model computes with on a virtual GPU (GEMM,
// elementwise layers, a loss, optimizer steps, a transformer's layers), apart
// from the device backends, which keep memory, streams, copies, IPC and
// discovery (device.h).
//
// A device kind has one table of bodies (struct math_ops: cpu/math_cpu.c, CPU
// loops and the build's BLAS; cuda/math_cuda.cu, CUDA kernels and cuBLAS on
// the device's stream): the core operations here (add, scale, sum_squares and
// clip_by_norm among them: they are general), and a pointer to a table of its
// own for each family (the transformer's: struct math_transformer_ops,
// math_transformer.h, which this header includes at its end). Each operation
// is its contract, its argument checks (what a GPU would fault on, the
// simulation refuses) and a call through the table (MATH_CALL_, or
// MATH_FAMILY_CALL_ for a family's); where the CPU and the GPU share its
// per-element arithmetic, that is a KERNEL_FN of an index next to it (the CPU
// calls it in a loop, a __global__ wrapper on the GPU), so the CPU tests test
// the GPU's math too. A new operation is 3 files of this folder: its member,
// element function and entry in its family's header (a core operation's:
// here), and a body and a row of that table in each backend's file. A new
// family: its header; here, a pointer member and an #include; in each
// backend's file, its table and the pointer to it.
//
// The entries are inlined into their callers, vgpu_train's models among
// them (through libvgpu: launcher/api/trainer/vgpu/vgpu_math.h), so what
// they call of the library has names libvgpu exports to its trainer
// (vgpu_math_*, libvgpu.map's private node); a new operation adds none.
//
// Contract of every operation: pointers are device memory of dev (else
// VGPU_EINVAL, said); work is queued on the device's stream in order, as a
// kernel launch is; returns 0 or a negative status, said with its place.
// Row-major throughout.
#ifndef VGPU_MATH_H
#define VGPU_MATH_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "kernels.h" // KERNEL_FN
#include "log.h"
#include "status.h"
#include "trace.h" // enum trace_op

// softmax_xent's per-sample output: one row of XENT_STATS floats a sample,
// {loss, correct (top-1), in top-5}.
#define XENT_STATS 3

struct math_transformer_ops; // math_transformer.h

struct math_ops {
    int (*gemm)(device_t *dev, int trans_a, int trans_b, int m, int n, int k, float alpha,
                const float *a, const float *b, float beta, float *c);
    int (*decode_u8)(device_t *dev, float *out, const uint8_t *codes, const float *table, size_t n);
    int (*bias_add)(device_t *dev, float *out, const float *bias, int rows, int cols, int relu);
    int (*bias_grad)(device_t *dev, float *dbias, const float *dout, int rows, int cols);
    int (*relu_backward)(device_t *dev, float *din, const float *dout, const float *out, size_t n);
    int (*softmax_xent)(device_t *dev, float *dlogits, float *stats, const float *logits,
                        const int32_t *labels, int rows, int classes, float grad_scale);
    int (*axpby)(device_t *dev, float *y, float a, const float *x, float b, size_t n);
    int (*sgd_step)(device_t *dev, float *param, const float *grad, float *velocity, size_t n,
                    float lr, float momentum, float weight_decay);
    int (*adam_step)(device_t *dev, float *param, const float *grad, float *m, float *v, size_t n,
                     float lr, float beta1, float beta2, float eps, float weight_decay,
                     float bias_corr1, float bias_corr2, int decoupled);
    int (*add)(device_t *dev, float *out, const float *a, const float *b, size_t n);
    int (*scale)(device_t *dev, float *x, float s, size_t n);
    int (*sum_squares)(device_t *dev, float *out, const float *x, size_t n);
    int (*clip_by_norm)(device_t *dev, float *x, const float *sum_sq, float clip, size_t n);
    // The families' tables (NULL: the backend has none; its entries then
    // return VGPU_EUNSUPPORTED).
    const struct math_transformer_ops *transformer; // math_transformer.h
};

// The math for dev (math_ops.c's registry: by what its memory is); NULL,
// said, where this binary has none for it (the entries below then return
// VGPU_EUNSUPPORTED).
const struct math_ops *vgpu_math_for(const device_t *dev);
// device_check_range (dev NULL: VGPU_EINVAL, said) and device_zero
// (device.h) under the names the entries call them by.
int vgpu_math_check_range(const device_t *dev, const void *p, size_t bytes, const char *what,
                          const char *op);
int vgpu_math_zero(device_t *dev, void *dst, size_t bytes);
// The timeline's count of the entries' calls (MATH_RUN_): the start (0 when
// not tracing), and the end with the call's kind (enum trace_op) and FLOPs;
// its bytes are those vgpu_math_check_range passed since the last end.
uint64_t vgpu_math_op_begin(void);
void vgpu_math_op_end(uint64_t start_ns, unsigned kind, uint64_t flops);
// Waits for the device without counting it as the program's wait: the
// timeline's own (a traced phase waits for its kernels to hold their time).
int vgpu_math_wait(device_t *dev);
// The backends' tables (a backend not built answers NULL: cuda/absent.c).
const struct math_ops *math_cpu_ops(void);
const struct math_ops *math_cuda_ops(void);

// ---- the operations ----

#define MATH_F_ sizeof(float)
#define MATH_DEV_(p, bytes, what, op) TRY(vgpu_math_check_range(dev, (p), (bytes), (what), (op)))
// Every entry's call is counted for the timeline (trace.h's device
// operations, while tracing): its kind (TRACE_OP_GEMM for matrix products,
// else TRACE_OP_KERNEL), the FLOPs given, the bytes its checks passed
// (MATH_DEV_: each operand once), the time the call took.
#define MATH_RUN_(kind, flops, call)                                                       \
    do {                                                                                   \
        const uint64_t t_ = vgpu_math_op_begin();                                          \
        const int rc_ = (call);                                                            \
        vgpu_math_op_end(t_, (kind), (flops));                                             \
        return rc_;                                                                        \
    } while (0)
#define MATH_CALL_FLOPS_(kind, flops, fn, ...)                                             \
    do {                                                                                   \
        const struct math_ops *ops_ = vgpu_math_for(dev);                                  \
        if (!ops_)                                                                         \
            return VGPU_EUNSUPPORTED;                                                      \
        MATH_RUN_(kind, flops, ops_->fn(dev, __VA_ARGS__));                                \
    } while (0)
#define MATH_CALL_(fn, ...) MATH_CALL_FLOPS_(TRACE_OP_KERNEL, 0, fn, __VA_ARGS__)
// A family's operation: through the device's table of that family.
#define MATH_FAMILY_CALL_FLOPS_(kind, flops, family, fn, ...)                              \
    do {                                                                                   \
        const struct math_ops *ops_ = vgpu_math_for(dev);                                  \
        if (!ops_ || !ops_->family)                                                        \
            return VGPU_EUNSUPPORTED;                                                      \
        MATH_RUN_(kind, flops, ops_->family->fn(dev, __VA_ARGS__));                        \
    } while (0)
#define MATH_FAMILY_CALL_(family, fn, ...)                                                 \
    MATH_FAMILY_CALL_FLOPS_(TRACE_OP_KERNEL, 0, family, fn, __VA_ARGS__)

static inline int math_axpby(device_t *dev, float *y, float a, const float *x, float b, size_t n);

// c[m,n] = alpha * op(a) @ op(b) + beta * c; op(a) is [m,k], op(b) is [k,n];
// a is stored [m,k] (or [k,m] when trans_a), b [k,n] (or [n,k] when trans_b).
static inline int math_gemm(device_t *dev, int trans_a, int trans_b, int m, int n, int k,
                            float alpha, const float *a, const float *b, float beta, float *c)
{
    if (m < 0 || n < 0 || k < 0)
        return VGPU_EINVAL;
    if (m == 0 || n == 0)
        return 0;
    MATH_DEV_(a, (size_t)m * k * MATH_F_, "A", "gemm");
    MATH_DEV_(b, (size_t)k * n * MATH_F_, "B", "gemm");
    MATH_DEV_(c, (size_t)m * n * MATH_F_, "C", "gemm");
    if (k == 0) // an empty product: BLAS libraries disagree on the leading dimensions
        return beta == 0.0f ? vgpu_math_zero(dev, c, (size_t)m * n * MATH_F_)
                            : math_axpby(dev, c, 0.0f, c, beta, (size_t)m * n);
    MATH_CALL_FLOPS_(TRACE_OP_GEMM, 2 * (uint64_t)m * (uint64_t)n * (uint64_t)k, gemm, trans_a,
                     trans_b, m, n, k, alpha, a, b, beta, c);
}

// out[i] = table[codes[i]]: 8-bit samples to values by their 256-entry table.
KERNEL_FN void kernel_decode_u8(size_t i, float *out, const uint8_t *codes, const float *table)
{
    out[i] = table[codes[i]];
}

// out[i] = table[codes[i]] for i < n; table holds 256 floats. Input batches
// cross to the device as 8-bit codes, a quarter of the bytes of floats.
static inline int math_decode_u8(device_t *dev, float *out, const uint8_t *codes,
                                 const float *table, size_t n)
{
    if (!n)
        return 0;
    MATH_DEV_(out, n * MATH_F_, "out", "decode_u8");
    MATH_DEV_(codes, n, "codes", "decode_u8");
    MATH_DEV_(table, 256 * MATH_F_, "table", "decode_u8");
    MATH_CALL_(decode_u8, out, codes, table, n);
}

// out[i] += bias[i % cols], then max(out[i], 0) when relu; i over rows * cols.
// One pass for a hidden layer's bias and activation.
KERNEL_FN void kernel_bias_add(size_t i, float *out, const float *bias, int cols, int relu)
{
    float x = out[i] + bias[i % (size_t)cols];
    out[i] = relu && !(x > 0.0f) ? 0.0f : x; // as x > 0 ? x : 0, NaN included
}

// out[r,c] += bias[c], then out = max(out, 0) when relu != 0; out is [rows, cols].
static inline int math_bias_add(device_t *dev, float *out, const float *bias, int rows, int cols,
                                int relu)
{
    if (rows <= 0 || cols <= 0)
        return rows < 0 || cols < 0 ? VGPU_EINVAL : 0;
    MATH_DEV_(out, (size_t)rows * cols * MATH_F_, "out", "bias_add");
    MATH_DEV_(bias, (size_t)cols * MATH_F_, "bias", "bias_add");
    MATH_CALL_(bias_add, out, bias, rows, cols, relu != 0);
}

// dbias[c] = sum over rows of dout[r, c]; c over cols. Sums rows in order,
// so the result does not depend on how columns are spread over threads.
KERNEL_FN void kernel_bias_grad(size_t c, float *dbias, const float *dout, int rows, int cols)
{
    float sum = 0.0f;
    for (int r = 0; r < rows; r++)
        sum += dout[(size_t)r * (size_t)cols + c];
    dbias[c] = sum;
}

// dbias[c] = sum_r dout[r,c] (overwritten; zeros when rows is 0).
static inline int math_bias_grad(device_t *dev, float *dbias, const float *dout, int rows,
                                 int cols)
{
    if (rows < 0 || cols < 0)
        return VGPU_EINVAL;
    if (cols == 0)
        return 0;
    MATH_DEV_(dbias, (size_t)cols * MATH_F_, "dbias", "bias_grad");
    if (rows == 0) // the sum of no rows
        return vgpu_math_zero(dev, dbias, (size_t)cols * MATH_F_);
    MATH_DEV_(dout, (size_t)rows * cols * MATH_F_, "dout", "bias_grad");
    MATH_CALL_(bias_grad, dbias, dout, rows, cols);
}

// Both operands are read unconditionally, so the select compiles without a
// branch: a mispredicted branch per element made this 8% of a CPU step.
KERNEL_FN void kernel_relu_backward(size_t i, float *din, const float *dout, const float *out)
{
    float d = dout[i];
    din[i] = out[i] > 0.0f ? d : 0.0f;
}

// din = out > 0 ? dout : 0 (out is the ReLU output); in-place (din == dout) allowed.
static inline int math_relu_backward(device_t *dev, float *din, const float *dout,
                                     const float *out, size_t n)
{
    if (!n)
        return 0;
    MATH_DEV_(din, n * MATH_F_, "din", "relu_backward");
    MATH_DEV_(dout, n * MATH_F_, "dout", "relu_backward");
    MATH_DEV_(out, n * MATH_F_, "out", "relu_backward");
    MATH_CALL_(relu_backward, din, dout, out, n);
}

// One row of softmax cross-entropy (row over rows). Stable: subtracts the
// row max before exponentiating. stats row: {loss, correct, in top-5}.
// Returns 0, or -1 if the label is out of range (the row is then left as is).
KERNEL_FN int kernel_softmax_xent(size_t row, float *dlogits, float *stats, const float *logits,
                                  const int32_t *labels, int classes, float grad_scale)
{
    const float *z = logits + row * (size_t)classes;
    int32_t y = labels[row];
    if (y < 0 || y >= classes)
        return -1;
    float zmax = z[0], zy = z[y];
    for (int j = 1; j < classes; j++)
        zmax = z[j] > zmax ? z[j] : zmax;
    // Rank of the true class: how many logits beat it (ties count for the
    // earlier index, as argmax picks the first maximum).
    int better = 0;
    for (int j = 0; j < classes; j++)
        better += z[j] > zy || (z[j] == zy && j < y);
    // The exponentials are kept in dlogits (when given) for the gradient:
    // one expf per logit instead of two. Logits are not read after this loop,
    // so dlogits may be the logits buffer itself.
    float *d = dlogits ? dlogits + row * (size_t)classes : NULL;
    float sum = 0.0f;
    for (int j = 0; j < classes; j++) {
        float e = expf(z[j] - zmax);
        if (d)
            d[j] = e;
        sum += e;
    }
    // A row whose loss is not finite (NaN or infinite logits) is wrong: NaN
    // compares false, so it would otherwise rank first.
    float loss = logf(sum) - (zy - zmax);
    int finite = isfinite(loss);
    stats[row * 3 + 0] = loss;
    stats[row * 3 + 1] = finite && better == 0 ? 1.0f : 0.0f;
    stats[row * 3 + 2] = finite && better < 5 ? 1.0f : 0.0f;
    if (d)
        for (int j = 0; j < classes; j++)
            d[j] = (d[j] / sum - (j == y ? 1.0f : 0.0f)) * grad_scale;
    return 0;
}

// Numerically stable softmax cross-entropy per row of logits[rows, classes]:
// dlogits = (softmax - onehot(label)) * grad_scale; stats[rows, XENT_STATS].
// dlogits may be NULL (evaluation). Labels outside [0, classes) give
// VGPU_EINVAL, said when the call returns (on a GPU too: read later, the
// verdict could surface inside a collective on one rank only).
static inline int math_softmax_xent(device_t *dev, float *dlogits, float *stats,
                                    const float *logits, const int32_t *labels, int rows,
                                    int classes, float grad_scale)
{
    if (rows < 0 || classes <= 0)
        return VGPU_EINVAL;
    if (rows == 0)
        return 0;
    size_t n = (size_t)rows * classes * MATH_F_;
    if (dlogits)
        MATH_DEV_(dlogits, n, "dlogits", "softmax_xent");
    MATH_DEV_(stats, (size_t)rows * XENT_STATS * MATH_F_, "stats", "softmax_xent");
    MATH_DEV_(logits, n, "logits", "softmax_xent");
    MATH_DEV_(labels, (size_t)rows * sizeof(int32_t), "labels", "softmax_xent");
    MATH_CALL_(softmax_xent, dlogits, stats, logits, labels, rows, classes, grad_scale);
}

// y = a * x + b * y.
KERNEL_FN void kernel_axpby(size_t i, float *y, float a, const float *x, float b)
{
    y[i] = a * x[i] + b * y[i];
}

// y = a * x + b * y.
static inline int math_axpby(device_t *dev, float *y, float a, const float *x, float b, size_t n)
{
    if (!n)
        return 0;
    MATH_DEV_(y, n * MATH_F_, "y", "axpby");
    MATH_DEV_(x, n * MATH_F_, "x", "axpby");
    MATH_CALL_(axpby, y, a, x, b, n);
}

// SGD with momentum (PyTorch's form: v = mu * v + g; p -= lr * v) and L2 decay.
KERNEL_FN void kernel_sgd_step(size_t i, float *param, const float *grad, float *velocity, float lr,
                               float momentum, float weight_decay)
{
    float g = grad[i] + weight_decay * param[i];
    float v = momentum * velocity[i] + g;
    velocity[i] = v;
    param[i] -= lr * v;
}

// SGD with momentum and (L2) weight decay.
static inline int math_sgd_step(device_t *dev, float *param, const float *grad, float *velocity,
                                size_t n, float lr, float momentum, float weight_decay)
{
    if (!n)
        return 0;
    MATH_DEV_(param, n * MATH_F_, "param", "sgd_step");
    MATH_DEV_(grad, n * MATH_F_, "grad", "sgd_step");
    MATH_DEV_(velocity, n * MATH_F_, "velocity", "sgd_step");
    MATH_CALL_(sgd_step, param, grad, velocity, n, lr, momentum, weight_decay);
}

// Adam (decoupled = 0: L2 decay added to the gradient) or AdamW (decoupled
// decay applied to the parameter), in PyTorch's arrangement: with bias_corr =
// 1 - beta^t, step_size = lr / bias_corr1 and inv_sqrt_bc2 = 1 / sqrt(bias_corr2)
// (kernel_adam_coefs, once per step), an element costs one sqrt and one
// division instead of three divisions and a sqrt.
struct adam_coefs {
    float step_size, inv_sqrt_bc2, lr_decay;
};

KERNEL_FN struct adam_coefs kernel_adam_coefs(float lr, float weight_decay, float bias_corr1,
                                              float bias_corr2)
{
    struct adam_coefs c = {lr / bias_corr1, 1.0f / sqrtf(bias_corr2), lr * weight_decay};
    return c;
}

KERNEL_FN void kernel_adam_step(size_t i, float *param, const float *grad, float *m, float *v,
                                float beta1, float beta2, float eps, float weight_decay,
                                struct adam_coefs c, int decoupled)
{
    float g = grad[i];
    if (!decoupled)
        g += weight_decay * param[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = mi;
    v[i] = vi;
    float delta = c.step_size * (mi / (sqrtf(vi) * c.inv_sqrt_bc2 + eps));
    if (decoupled)
        delta += c.lr_decay * param[i];
    param[i] -= delta;
}

// Adam; decoupled != 0 gives AdamW. bias_corr* = 1 - beta^t.
static inline int math_adam_step(device_t *dev, float *param, const float *grad, float *m,
                                 float *v, size_t n, float lr, float beta1, float beta2, float eps,
                                 float weight_decay, float bias_corr1, float bias_corr2,
                                 int decoupled)
{
    if (!n)
        return 0;
    MATH_DEV_(param, n * MATH_F_, "param", "adam_step");
    MATH_DEV_(grad, n * MATH_F_, "grad", "adam_step");
    MATH_DEV_(m, n * MATH_F_, "m", "adam_step");
    MATH_DEV_(v, n * MATH_F_, "v", "adam_step");
    MATH_CALL_(adam_step, param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, bias_corr1,
               bias_corr2, decoupled);
}

// out = a + b; out may be a or b (a residual connection, in place).
KERNEL_FN void kernel_add(size_t i, float *out, const float *a, const float *b)
{
    out[i] = a[i] + b[i];
}

// out[i] = a[i] + b[i] for i < n; out may equal a or b.
static inline int math_add(device_t *dev, float *out, const float *a, const float *b, size_t n)
{
    if (!n)
        return 0;
    MATH_DEV_(out, n * MATH_F_, "out", "add");
    MATH_DEV_(a, n * MATH_F_, "a", "add");
    MATH_DEV_(b, n * MATH_F_, "b", "add");
    MATH_CALL_(add, out, a, b, n);
}

KERNEL_FN void kernel_scale(size_t i, float *x, float s) { x[i] *= s; }

// x[i] *= s for i < n.
static inline int math_scale(device_t *dev, float *x, float s, size_t n)
{
    if (!n)
        return 0;
    MATH_DEV_(x, n * MATH_F_, "x", "scale");
    MATH_CALL_(scale, x, s, n);
}

// sum_squares's fixed partition, the same on every device and for any number
// of threads: blocks of MATH_SQ_BLOCK elements; in a block, lane j of
// MATH_SQ_LANES sums the elements j, j + 32, ... (in order, in double); the
// block's sum is its lanes' in lane order, the total its blocks' in block
// order (double), rounded to float once. A float's square is exact in
// double, so an FMA could not change a bit either.
#define MATH_SQ_BLOCK 4096
#define MATH_SQ_LANES 32

// Lane `lane` of block k (of x[0, n)): its elements' squares summed in order.
KERNEL_FN double kernel_sum_squares_lane(size_t k, int lane, const float *x, size_t n)
{
    size_t end = (k + 1) * MATH_SQ_BLOCK < n ? (k + 1) * MATH_SQ_BLOCK : n;
    double acc = 0.0;
    for (size_t i = k * MATH_SQ_BLOCK + (size_t)lane; i < end; i += MATH_SQ_LANES)
        acc += (double)x[i] * (double)x[i];
    return acc;
}

// A block's sum from its lanes' (lane order), or the total from the blocks'
// (block order): sum of p[0, count) in order from 0.
KERNEL_FN double kernel_sum_in_order(const double *p, size_t count)
{
    double s = 0.0;
    for (size_t j = 0; j < count; j++)
        s += p[j];
    return s;
}

// *out = sum of x[i]^2 for i < n (one float of device memory; 0 for n = 0),
// by the partition above: the same bits on every device (the CPU and a GPU
// alike) and every run, whatever the threads. For the global gradient norm.
static inline int math_sum_squares(device_t *dev, float *out, const float *x, size_t n)
{
    MATH_DEV_(out, MATH_F_, "out", "sum_squares");
    if (!n)
        return vgpu_math_zero(dev, out, MATH_F_);
    MATH_DEV_(x, n * MATH_F_, "x", "sum_squares");
    MATH_CALL_(sum_squares, out, x, n);
}

// clip_by_norm's factor from a sum of squares: clip / (norm + 1e-6), norm =
// sqrt(sum_sq), in float as torch.nn.utils.clip_grad_norm_ computes it (the
// 1e-6 guards a zero norm); it scales only where it is below 1.
KERNEL_FN float kernel_clip_coef(float sum_sq, float clip)
{
    return clip / (sqrtf(sum_sq) + 1e-6f);
}

// x[i] *= kernel_clip_coef(*sum_sq, clip) for i < n when that factor is below
// 1 (else x is left as it is): x clipped to the L2 norm clip, given its sum
// of squares (one float of device memory: math_sum_squares's out). The sum
// is read on the device, so the host neither copies it nor waits for it.
// clip > 0, else VGPU_EINVAL.
static inline int math_clip_by_norm(device_t *dev, float *x, const float *sum_sq, float clip,
                                    size_t n)
{
    if (!(clip > 0.0f)) {
        log_error("clip_by_norm: clip %g (a norm: above 0)", (double)clip);
        return VGPU_EINVAL;
    }
    if (!n)
        return 0;
    MATH_DEV_(x, n * MATH_F_, "x", "clip_by_norm");
    MATH_DEV_(sum_sq, MATH_F_, "sum_sq", "clip_by_norm");
    MATH_CALL_(clip_by_norm, x, sum_sq, clip, n);
}

// The families (a header each): the transformer's operations (embeddings,
// layer norm, attention, GELU).
#include "math_transformer.h"

#endif
