// math_cuda.cu: the model's math on a CUDA virtual GPU (math_ops.h,
// math_transformer.h): one __global__ wrapper a element function, launched
// on the device's stream, and GEMM through cuBLAS (loaded when first used:
// cublas_lib.c) on the same stream. A device's math state (the cuBLAS
// handle, the index flag, scratch) is made at its first operation, so a
// program that only moves data and reduces (collectives, an NCCL program)
// never loads cuBLAS.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdlib.h>

#include "cuda_check.h"

extern "C" {
#include "device_internal.h" // device_stream
#include "math_ops.h"
}

#define CUBLAS_CHECK(call) TRY(cublas_check_((call), #call, __FILE__, __LINE__))

static int cublas_check_(cublasStatus_t rc, const char *what, const char *file, int line)
{
    if (rc == CUBLAS_STATUS_SUCCESS)
        return 0;
    log_error("%s:%d: %s failed: cuBLAS status %d", file, line, what, (int)rc);
    return VGPU_EIO;
}

struct math_cuda {
    cublasHandle_t blas;   // on the device's stream
    int *bad_index;        // device flag set on a label or token out of range
    int *bad_index_host;   // its copy (page-locked), read before the call returns
    void *scratch;         // device memory the operations borrow, beside the cap (small:
                           // sum_squares' partials, embed_backward's chains)
    size_t scratch_bytes;  // its size
};

static cudaStream_t stream_(const device_t *dev) { return (cudaStream_t)device_stream(dev); }

static void release_(device_t *dev)
{
    struct math_cuda *st = (struct math_cuda *)dev->math;
    if (!st)
        return;
    cudaSetDevice(dev->info.index);
    if (st->bad_index)
        cudaFree(st->bad_index);
    if (st->bad_index_host)
        cudaFreeHost(st->bad_index_host);
    if (st->scratch)
        cudaFree(st->scratch);
    if (st->blas)
        cublasDestroy(st->blas);
    free(st);
    dev->math = NULL;
}

static int make_state_(device_t *dev, struct math_cuda *st)
{
    CUBLAS_CHECK(cublasCreate(&st->blas));
    CUBLAS_CHECK(cublasSetStream(st->blas, stream_(dev)));
    CUDA_CHECK(cudaMalloc(&st->bad_index, sizeof(int)));
    CUDA_CHECK(cudaMallocHost(&st->bad_index_host, sizeof(int)));
    *st->bad_index_host = 0;
    // On the stream every kernel runs on: the legacy stream does not order
    // with a non-blocking one.
    CUDA_CHECK(cudaMemsetAsync(st->bad_index, 0, sizeof(int), stream_(dev)));
    CUDA_CHECK(cudaStreamSynchronize(stream_(dev)));
    return 0;
}

// The device's math state, made current; made at the first call. A state
// that failed half-way is released and made again by the next call.
static int state_(device_t *dev, struct math_cuda **out)
{
    USE_DEVICE(dev);
    if (!dev->math) {
        struct math_cuda *st = (struct math_cuda *)calloc(1, sizeof *st);
        if (!st)
            return VGPU_ENOMEM;
        dev->math = st;
        dev->math_release = release_;
        int rc = make_state_(dev, st);
        if (rc < 0) {
            release_(dev);
            return rc;
        }
    }
    *out = (struct math_cuda *)dev->math;
    return 0;
}

// At least `bytes` of the state's scratch. Grown rarely (the first call, a
// larger size); the old block may be in use by queued kernels, so the
// stream is waited for before it is freed.
static int scratch_(device_t *dev, struct math_cuda *st, size_t bytes, void **out)
{
    if (bytes > st->scratch_bytes) {
        if (st->scratch) {
            CUDA_CHECK(cudaStreamSynchronize(stream_(dev)));
            CUDA_CHECK(cudaFree(st->scratch));
            st->scratch = NULL;
            st->scratch_bytes = 0;
        }
        CUDA_CHECK(cudaMalloc(&st->scratch, bytes));
        st->scratch_bytes = bytes;
    }
    *out = st->scratch;
    return 0;
}

// The index flag's verdict, read when the call returns, as the CPU device
// gives it: read at a later synchronisation it could surface inside a
// collective on this rank only, and strand the others there until the
// timeout. One wait for the stream a call. Clears a set flag.
static int read_bad_index_(device_t *dev, struct math_cuda *st, int *bad)
{
    CUDA_CHECK(cudaMemcpyAsync(st->bad_index_host, st->bad_index, sizeof(int),
                               cudaMemcpyDeviceToHost, stream_(dev)));
    CUDA_CHECK(cudaStreamSynchronize(stream_(dev)));
    *bad = *st->bad_index_host;
    if (*bad) {
        *st->bad_index_host = 0;
        CUDA_CHECK(cudaMemsetAsync(st->bad_index, 0, sizeof(int), stream_(dev)));
        CUDA_CHECK(cudaStreamSynchronize(stream_(dev)));
    }
    return 0;
}

static int cuda_gemm_(device_t *dev, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, const float *b, float beta, float *c)
{
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
    struct math_cuda *st;
    TRY(state_(dev, &st));
    CUBLAS_CHECK(cublasSgemm(st->blas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                             trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
                             trans_b ? k : n, a, trans_a ? m : k, &beta, c, n));
    return 0;
}

__global__ void decode_u8_kernel(float *out, const uint8_t *codes, const float *table, size_t n)
{
    GRID_STRIDE(i, n) kernel_decode_u8(i, out, codes, table);
}

__global__ void bias_add_kernel(float *out, const float *bias, size_t n, int cols, int relu)
{
    GRID_STRIDE(i, n) kernel_bias_add(i, out, bias, cols, relu);
}

__global__ void bias_grad_kernel(float *dbias, const float *dout, int rows, int cols)
{
    GRID_STRIDE(c, (size_t)cols) kernel_bias_grad(c, dbias, dout, rows, cols);
}

__global__ void relu_backward_kernel(float *din, const float *dout, const float *out, size_t n)
{
    GRID_STRIDE(i, n) kernel_relu_backward(i, din, dout, out);
}

__global__ void softmax_xent_kernel(float *dlogits, float *stats, const float *logits,
                                    const int32_t *labels, int rows, int classes, float grad_scale,
                                    int *bad_index)
{
    GRID_STRIDE(r, (size_t)rows)
    if (kernel_softmax_xent(r, dlogits, stats, logits, labels, classes, grad_scale) < 0)
        *bad_index = 1;
}

__global__ void axpby_kernel(float *y, float a, const float *x, float b, size_t n)
{
    GRID_STRIDE(i, n) kernel_axpby(i, y, a, x, b);
}

__global__ void sgd_step_kernel(float *p, const float *g, float *v, size_t n, float lr, float mu,
                                float wd)
{
    GRID_STRIDE(i, n) kernel_sgd_step(i, p, g, v, lr, mu, wd);
}

__global__ void adam_step_kernel(float *p, const float *g, float *m, float *v, size_t n, float b1,
                                 float b2, float eps, float wd, struct adam_coefs c, int decoupled)
{
    GRID_STRIDE(i, n) kernel_adam_step(i, p, g, m, v, b1, b2, eps, wd, c, decoupled);
}

__global__ void add_kernel(float *out, const float *a, const float *b, size_t n)
{
    GRID_STRIDE(i, n) kernel_add(i, out, a, b);
}

__global__ void scale_kernel(float *x, float s, size_t n)
{
    GRID_STRIDE(i, n) kernel_scale(i, x, s);
}

// Each thread computes the factor from the device's sum (the same bits as the
// CPU's: IEEE sqrt and division, nvcc's defaults); none writes when it is not
// below 1.
__global__ void clip_by_norm_kernel(float *x, const float *sum_sq, float clip, size_t n)
{
    const float coef = kernel_clip_coef(*sum_sq, clip);
    if (coef < 1.0f)
        GRID_STRIDE(i, n) kernel_scale(i, x, coef);
}

static_assert(MATH_SQ_LANES == 32, "sum_squares: a block's lanes are a warp's");

// A warp a block of sum_squares' partition: lane j sums its terms, then the
// lanes' sums are added in lane order (kernel_sum_in_order, by shuffles).
// The warp's block is the same for its 32 threads (256-thread blocks), so
// the shuffles see every lane.
__global__ void sum_squares_blocks_kernel(double *partial, const float *x, size_t n, size_t blocks)
{
    const int lane = threadIdx.x % MATH_SQ_LANES;
    const size_t warps = (size_t)gridDim.x * blockDim.x / MATH_SQ_LANES;
    for (size_t k = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / MATH_SQ_LANES; k < blocks;
         k += warps) {
        double v = kernel_sum_squares_lane(k, lane, x, n), s = 0.0;
        for (int j = 0; j < MATH_SQ_LANES; j++)
            s += __shfl_sync(0xffffffffu, v, j);
        if (lane == 0)
            partial[k] = s;
    }
}

// The blocks' sums in block order, by one thread; rounded to float once.
__global__ void sum_in_order_kernel(float *out, const double *partial, size_t blocks)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *out = (float)kernel_sum_in_order(partial, blocks);
}

// ---- the transformer (math_transformer.h) ----

__global__ void embed_forward_kernel(float *out, const int32_t *tokens, const float *wte,
                                     const float *wpe, int T, int C, int V, size_t n, int *bad)
{
    GRID_STRIDE(i, n)
    {
        const size_t bt = i / (size_t)C;
        if (kernel_token_ok(tokens[bt], V))
            kernel_embed_forward(bt, i % (size_t)C, out, tokens, wte, wpe, T, C);
        else
            *bad = 1;
    }
}

__global__ void embed_link_kernel(int32_t *next, uint8_t *has_prev, const int32_t *tokens,
                                  size_t positions, int V, int *bad)
{
    GRID_STRIDE(bt, positions)
    if (!kernel_embed_link(bt, next, has_prev, tokens, positions, V))
        *bad = 1;
}

// A thread an element of a token's row, for the first position of each
// token (the others are on its chain).
__global__ void embed_backward_wte_kernel(float *dwte, const float *dout, const int32_t *tokens,
                                          const int32_t *next, const uint8_t *has_prev, int C,
                                          size_t n)
{
    GRID_STRIDE(i, n)
    {
        const size_t bt = i / (size_t)C;
        if (!has_prev[bt])
            kernel_embed_backward_wte(bt, i % (size_t)C, dwte, dout, tokens, next, C);
    }
}

__global__ void embed_backward_wpe_kernel(float *dwpe, const float *dout, int B, int T, int C,
                                          size_t n)
{
    GRID_STRIDE(i, n) kernel_embed_backward_wpe(i, dwpe, dout, B, T, C);
}

__global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *inp,
                                         const float *weight, const float *bias, int rows, int C)
{
    GRID_STRIDE(r, (size_t)rows) kernel_layernorm_forward(r, out, mean, rstd, inp, weight, bias, C);
}

__global__ void layernorm_backward_row_kernel(float *dinp, const float *dout, const float *inp,
                                              const float *weight, const float *mean,
                                              const float *rstd, int rows, int C)
{
    GRID_STRIDE(r, (size_t)rows)
    kernel_layernorm_backward_row(r, dinp, dout, inp, weight, mean, rstd, C);
}

__global__ void layernorm_backward_param_kernel(float *dweight, float *dbias, const float *dout,
                                                const float *inp, const float *mean,
                                                const float *rstd, int rows, int C)
{
    GRID_STRIDE(c, (size_t)C)
    kernel_layernorm_backward_param(c, dweight, dbias, dout, inp, mean, rstd, rows, C);
}

__global__ void attention_softmax_kernel(float *att, const float *qkv, int T, int C, int NH,
                                         size_t rows)
{
    GRID_STRIDE(r, rows) kernel_attention_softmax(r, att, qkv, T, C, NH);
}

__global__ void attention_out_kernel(float *out, const float *att, const float *qkv, int T, int C,
                                     int NH, size_t n)
{
    GRID_STRIDE(i, n) kernel_attention_out(i, out, att, qkv, T, C, NH);
}

__global__ void attention_backward_q_kernel(float *dqkv, float *datt, const float *dout,
                                            const float *qkv, const float *att, int T, int C,
                                            int NH, size_t rows)
{
    GRID_STRIDE(r, rows) kernel_attention_backward_q(r, dqkv, datt, dout, qkv, att, T, C, NH);
}

__global__ void attention_backward_kv_kernel(float *dqkv, const float *datt, const float *dout,
                                             const float *qkv, const float *att, int T, int C,
                                             int NH, size_t n)
{
    GRID_STRIDE(i, n) kernel_attention_backward_kv(i, dqkv, datt, dout, qkv, att, T, C, NH);
}

__global__ void gelu_forward_kernel(float *out, const float *inp, size_t n)
{
    GRID_STRIDE(i, n) kernel_gelu_forward(i, out, inp);
}

__global__ void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t n)
{
    GRID_STRIDE(i, n) kernel_gelu_backward(i, dinp, inp, dout);
}

__global__ void seq_stats_kernel(float *out, const float *xent, int T, size_t B)
{
    GRID_STRIDE(b, B) kernel_seq_stats(b, out, xent, T);
}

// Makes the device current and launches on its stream.
#define LAUNCH(kernel, n, ...)                                                               \
    do {                                                                                     \
        USE_DEVICE(dev);                                                                     \
        CUDA_LAUNCH(stream_(dev), kernel, n, __VA_ARGS__);                                   \
    } while (0)

static int cuda_decode_u8_(device_t *dev, float *out, const uint8_t *codes, const float *table,
                           size_t n)
{
    LAUNCH(decode_u8_kernel, n, out, codes, table, n);
    return 0;
}

static int cuda_bias_add_(device_t *dev, float *out, const float *bias, int rows, int cols,
                          int relu)
{
    size_t n = (size_t)rows * cols;
    LAUNCH(bias_add_kernel, n, out, bias, n, cols, relu);
    return 0;
}

static int cuda_bias_grad_(device_t *dev, float *dbias, const float *dout, int rows, int cols)
{
    LAUNCH(bias_grad_kernel, (size_t)cols, dbias, dout, rows, cols);
    return 0;
}

static int cuda_relu_backward_(device_t *dev, float *din, const float *dout, const float *out,
                               size_t n)
{
    LAUNCH(relu_backward_kernel, n, din, dout, out, n);
    return 0;
}

static int cuda_softmax_xent_(device_t *dev, float *dlogits, float *stats, const float *logits,
                              const int32_t *labels, int rows, int classes, float grad_scale)
{
    struct math_cuda *im;
    TRY(state_(dev, &im));
    LAUNCH(softmax_xent_kernel, (size_t)rows, dlogits, stats, logits, labels, rows, classes,
           grad_scale, im->bad_index);
    // (A step makes one call a micro-batch.)
    int bad;
    TRY(read_bad_index_(dev, im, &bad));
    if (bad) {
        log_error("softmax_xent: a label is outside [0, %d)", classes);
        return VGPU_EINVAL;
    }
    return 0;
}

static int cuda_axpby_(device_t *dev, float *y, float a, const float *x, float b, size_t n)
{
    LAUNCH(axpby_kernel, n, y, a, x, b, n);
    return 0;
}

static int cuda_sgd_step_(device_t *dev, float *param, const float *grad, float *velocity,
                          size_t n, float lr, float momentum, float weight_decay)
{
    LAUNCH(sgd_step_kernel, n, param, grad, velocity, n, lr, momentum, weight_decay);
    return 0;
}

static int cuda_adam_step_(device_t *dev, float *param, const float *grad, float *m, float *v,
                           size_t n, float lr, float beta1, float beta2, float eps,
                           float weight_decay, float bias_corr1, float bias_corr2, int decoupled)
{
    LAUNCH(adam_step_kernel, n, param, grad, m, v, n, beta1, beta2, eps, weight_decay,
           kernel_adam_coefs(lr, weight_decay, bias_corr1, bias_corr2), decoupled);
    return 0;
}

static int cuda_add_(device_t *dev, float *out, const float *a, const float *b, size_t n)
{
    LAUNCH(add_kernel, n, out, a, b, n);
    return 0;
}

static int cuda_scale_(device_t *dev, float *x, float s, size_t n)
{
    LAUNCH(scale_kernel, n, x, s, n);
    return 0;
}

// The partition's block sums into the state's scratch, then their sum; the
// bits do not depend on the grid (math_ops.h).
static int cuda_sum_squares_(device_t *dev, float *out, const float *x, size_t n)
{
    struct math_cuda *st;
    TRY(state_(dev, &st));
    const size_t blocks = (n + MATH_SQ_BLOCK - 1) / MATH_SQ_BLOCK;
    void *partial;
    TRY(scratch_(dev, st, blocks * sizeof(double), &partial));
    LAUNCH(sum_squares_blocks_kernel, blocks * MATH_SQ_LANES, (double *)partial, x, n, blocks);
    LAUNCH(sum_in_order_kernel, 1, out, (const double *)partial, blocks);
    return 0;
}

static int cuda_clip_by_norm_(device_t *dev, float *x, const float *sum_sq, float clip, size_t n)
{
    LAUNCH(clip_by_norm_kernel, n, x, sum_sq, clip, n);
    return 0;
}

static int cuda_embed_forward_(device_t *dev, float *out, const int32_t *tokens,
                               const float *wte, const float *wpe, int B, int T, int C, int V)
{
    struct math_cuda *st;
    TRY(state_(dev, &st));
    const size_t n = (size_t)B * T * C;
    LAUNCH(embed_forward_kernel, n, out, tokens, wte, wpe, T, C, V, n, st->bad_index);
    int bad;
    TRY(read_bad_index_(dev, st, &bad));
    if (bad) {
        log_error("embed_forward: a token is outside [0, %d)", V);
        return VGPU_EINVAL;
    }
    return 0;
}

// The chains of positions a token (kernel_embed_link) in the state's
// scratch, the tokens' verdict read, then the sums; nothing is written on
// a bad token.
static int cuda_embed_backward_(device_t *dev, float *dwte, float *dwpe, const float *dout,
                                const int32_t *tokens, int B, int T, int C, int V)
{
    struct math_cuda *st;
    TRY(state_(dev, &st));
    const size_t positions = (size_t)B * T;
    void *chains;
    TRY(scratch_(dev, st, positions * (sizeof(int32_t) + 1), &chains));
    int32_t *next = (int32_t *)chains;
    uint8_t *has_prev = (uint8_t *)(next + positions);
    CUDA_CHECK(cudaMemsetAsync(has_prev, 0, positions, stream_(dev)));
    LAUNCH(embed_link_kernel, positions, next, has_prev, tokens, positions, V, st->bad_index);
    int bad;
    TRY(read_bad_index_(dev, st, &bad));
    if (bad) {
        log_error("embed_backward: a token is outside [0, %d)", V);
        return VGPU_EINVAL;
    }
    LAUNCH(embed_backward_wte_kernel, positions * C, dwte, dout, tokens, next, has_prev, C,
           positions * C);
    LAUNCH(embed_backward_wpe_kernel, (size_t)T * C, dwpe, dout, B, T, C, (size_t)T * C);
    return 0;
}

static int cuda_layernorm_forward_(device_t *dev, float *out, float *mean, float *rstd,
                                   const float *inp, const float *weight, const float *bias,
                                   int rows, int C)
{
    LAUNCH(layernorm_forward_kernel, (size_t)rows, out, mean, rstd, inp, weight, bias, rows, C);
    return 0;
}

static int cuda_layernorm_backward_(device_t *dev, float *dinp, float *dweight, float *dbias,
                                    const float *dout, const float *inp, const float *weight,
                                    const float *mean, const float *rstd, int rows, int C)
{
    LAUNCH(layernorm_backward_row_kernel, (size_t)rows, dinp, dout, inp, weight, mean, rstd,
           rows, C);
    LAUNCH(layernorm_backward_param_kernel, (size_t)C, dweight, dbias, dout, inp, mean, rstd,
           rows, C);
    return 0;
}

static int cuda_attention_forward_(device_t *dev, float *out, float *att, const float *qkv,
                                   int B, int T, int C, int NH)
{
    const size_t rows = (size_t)B * NH * T, n = (size_t)B * T * C;
    LAUNCH(attention_softmax_kernel, rows, att, qkv, T, C, NH, rows);
    LAUNCH(attention_out_kernel, n, out, att, qkv, T, C, NH, n);
    return 0;
}

// Two passes: every datt row (and dq) first, then dk and dv, which read
// whole columns of datt.
static int cuda_attention_backward_(device_t *dev, float *dqkv, float *datt, const float *dout,
                                    const float *qkv, const float *att, int B, int T, int C,
                                    int NH)
{
    const size_t rows = (size_t)B * NH * T, n = (size_t)B * T * C;
    LAUNCH(attention_backward_q_kernel, rows, dqkv, datt, dout, qkv, att, T, C, NH, rows);
    LAUNCH(attention_backward_kv_kernel, n, dqkv, datt, dout, qkv, att, T, C, NH, n);
    return 0;
}

static int cuda_gelu_forward_(device_t *dev, float *out, const float *inp, size_t n)
{
    LAUNCH(gelu_forward_kernel, n, out, inp, n);
    return 0;
}

static int cuda_gelu_backward_(device_t *dev, float *dinp, const float *inp, const float *dout,
                               size_t n)
{
    LAUNCH(gelu_backward_kernel, n, dinp, inp, dout, n);
    return 0;
}

static int cuda_seq_stats_(device_t *dev, float *out, const float *xent, int B, int T)
{
    LAUNCH(seq_stats_kernel, (size_t)B, out, xent, T, (size_t)B);
    return 0;
}

static const struct math_transformer_ops math_cuda_transformer_ops_ = {
    /* .embed_forward = */ cuda_embed_forward_,
    /* .embed_backward = */ cuda_embed_backward_,
    /* .layernorm_forward = */ cuda_layernorm_forward_,
    /* .layernorm_backward = */ cuda_layernorm_backward_,
    /* .attention_forward = */ cuda_attention_forward_,
    /* .attention_backward = */ cuda_attention_backward_,
    /* .gelu_forward = */ cuda_gelu_forward_,
    /* .gelu_backward = */ cuda_gelu_backward_,
    /* .seq_stats = */ cuda_seq_stats_,
};

static const struct math_ops math_cuda_ops_ = {
    /* .gemm = */ cuda_gemm_,
    /* .decode_u8 = */ cuda_decode_u8_,
    /* .bias_add = */ cuda_bias_add_,
    /* .bias_grad = */ cuda_bias_grad_,
    /* .relu_backward = */ cuda_relu_backward_,
    /* .softmax_xent = */ cuda_softmax_xent_,
    /* .axpby = */ cuda_axpby_,
    /* .sgd_step = */ cuda_sgd_step_,
    /* .adam_step = */ cuda_adam_step_,
    /* .add = */ cuda_add_,
    /* .scale = */ cuda_scale_,
    /* .sum_squares = */ cuda_sum_squares_,
    /* .clip_by_norm = */ cuda_clip_by_norm_,
    /* .transformer = */ &math_cuda_transformer_ops_,
};

extern "C" const struct math_ops *math_cuda_ops(void) { return &math_cuda_ops_; }
