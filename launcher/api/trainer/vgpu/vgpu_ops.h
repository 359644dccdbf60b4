// vgpu/vgpu_ops.h: vgpu_train's kernels on vgpu device memory, on every
// device kind: GEMM, the MLP's elementwise kernels, softmax cross-entropy,
// optimizer steps. They are the MLP's, not a general math library, and
// change with vgpu_train: this header is not installed, and libvgpu.so
// exports them under the private version node VGPU_PRIVATE_0.
//
// vgpu/vgpu.h is the NCCL/CUDA-shaped core; this header is what a small
// trainer needs on top of it, written once for every device: CPU loops and
// the CPU BLAS on a CPU-simulated device, CUDA kernels and cuBLAS on a GPU,
// queued on the rank's stream (vgpu_stream) in order with the copies and
// collectives. vgpu_train is built on it. The kernels live in libvgpu because
// a C program cannot carry CUDA kernels of its own; a program may equally
// compute on its device memory itself (vgpu_launch_host_func on CPU-simulated
// devices, its own kernels on vgpu_stream on GPUs).
//
// Common to every function: pointers are device pointers of this rank
// (vgpu_malloc; a host pointer is refused with VGPU_EINVAL, as it would
// fault on a GPU); tensors are row-major float32; each returns 0 or a
// negative status (VGPU_EINVAL before vgpu_open; VGPU_EIO when a GPU
// failed, said). On a CPU device the work is done when the call returns; on
// a GPU it is queued, and a copy to the host or vgpu_synchronize waits for it.
// Element-wise kernels compute the same bits on both (+, -, *, / and sqrt are
// correctly rounded on both sides, no fused multiply-add); GEMMs and the
// softmax's expf/logf do not (cuBLAS and CUDA's libdevice differ from the CPU
// BLAS and glibc by rounding).
#ifndef VGPU_VGPU_OPS_H
#define VGPU_VGPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include <vgpu/vgpu.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- linear algebra and elementwise ----
// c[m,n] = alpha * op(a) @ op(b) + beta * c; a is [m,k] ([k,m] when trans_a),
// b is [k,n] ([n,k] when trans_b). beta = 0 overwrites c (its old contents,
// NaN included, are not read).
int vgpu_gemm(vgpu_t *v, int trans_a, int trans_b, int m, int n, int k, float alpha,
              const float *a, const float *b, float beta, float *c);
// out[i] = table[codes[i]], i < n; table holds 256 floats. 8-bit inputs
// (pixels) cross to the device as a quarter of the bytes of floats.
int vgpu_decode_u8(vgpu_t *v, float *out, const uint8_t *codes, const float *table, size_t n);
// out[r,c] += bias[c], then max(out, 0) when relu; out is [rows, cols].
int vgpu_bias_add(vgpu_t *v, float *out, const float *bias, int rows, int cols, int relu);
// dbias[c] = sum over r of dout[r,c] (overwritten); dout is [rows, cols].
int vgpu_bias_grad(vgpu_t *v, float *dbias, const float *dout, int rows, int cols);
// din = out > 0 ? dout : 0 (out: the ReLU's output); din == dout allowed.
int vgpu_relu_backward(vgpu_t *v, float *din, const float *dout, const float *out, size_t n);
// y = a * x + b * y.
int vgpu_axpby(vgpu_t *v, float *y, float a, const float *x, float b, size_t n);

// ---- the loss ----
// Softmax cross-entropy per row of logits[rows, classes] (stable: the row's
// maximum is subtracted before exponentiating). dlogits[rows, classes] =
// (softmax - onehot(label)) * grad_scale, or NULL when no gradient is wanted
// (evaluation); dlogits may be logits itself. stats[rows, VGPU_XENT_STATS]
// gets, for row r at stats + r * VGPU_XENT_STATS:
//   [0] the loss, -log softmax[label]
//   [1] 1 when the label is the top-1 class, else 0 (a tie goes to the
//       earlier class, as argmax takes the first maximum)
//   [2] 1 when the label is among the top 5, else 0
// (a row whose loss is not finite counts 0 in [1] and [2]). labels (int32,
// device) must lie in [0, classes): else VGPU_EINVAL, said, and the rows are
// left undefined.
#define VGPU_XENT_STATS 3
int vgpu_softmax_xent(vgpu_t *v, float *dlogits, float *stats, const float *logits,
                      const int32_t *labels, int rows, int classes, float grad_scale);

// ---- optimizer steps (one element's update depends on that element alone) ----
// SGD with momentum and L2 weight decay, PyTorch's form: g = grad +
// weight_decay * param; velocity = momentum * velocity + g; param -= lr * velocity.
int vgpu_sgd_step(vgpu_t *v, float *param, const float *grad, float *velocity, size_t n,
                  float lr, float momentum, float weight_decay);
// Adam's hyper-parameters and the step being taken.
struct vgpu_adam {
    float lr;           // learning rate of this step
    float beta1, beta2; // decay of the first and second moments (0.9, 0.999)
    float eps;          // added to sqrt of the second moment (1e-8)
    float weight_decay; // L2 on the gradient (Adam) or decoupled (AdamW)
    int decoupled;      // AdamW: param -= lr * weight_decay * param, not through the gradient
    int64_t step;       // this update's number, 1-based: the bias corrections are
                        // 1 - beta^step (computed in double, as PyTorch does)
};
// Adam (AdamW when decoupled), arranged as PyTorch's; m and var are the
// first and second moments (zeros before step 1), n elements each.
int vgpu_adam_step(vgpu_t *v, float *param, const float *grad, float *m, float *var, size_t n,
                   const struct vgpu_adam *adam);

#ifdef __cplusplus
}
#endif

#endif
