// mlp.c: MLP forward and backward on device ops.
#include "mlp.h"

#include <math.h>
#include <string.h>

#include "job.h"
#include "log.h"
#include "rng.h"

int mlp_layout(struct mlp *m, const int *dims, int n_dims, int max_rows)
{
    memset(m, 0, sizeof *m);
    if (n_dims < 2 || n_dims > MLP_MAX_DIMS || max_rows <= 0)
        return VGPU_EINVAL;
    m->n_dims = n_dims;
    m->n_layers = n_dims - 1;
    m->max_rows = max_rows;
    size_t off = 0;
    for (int i = 0; i < n_dims; i++) {
        if (dims[i] <= 0)
            return VGPU_EINVAL;
        m->dims[i] = dims[i];
    }
    for (int l = 0; l < m->n_layers; l++) {
        m->w_offset[l] = off;
        off += (size_t)dims[l] * dims[l + 1];
        m->b_offset[l] = off;
        off += (size_t)dims[l + 1];
    }
    m->param_count = off;
    return 0;
}

static size_t widest_(const struct mlp *m)
{
    int w = 0;
    for (int i = 0; i < m->n_dims; i++)
        w = m->dims[i] > w ? m->dims[i] : w;
    return (size_t)w;
}

uint64_t mlp_device_bytes(const struct mlp *m, int opt_state_per_param)
{
    // Each allocation may round up to the arena's alignment.
    uint64_t pad = VGPU_MALLOC_ALIGN, rows = (uint64_t)m->max_rows, bytes = 0;
    bytes += (2 + (uint64_t)opt_state_per_param) * (m->param_count * 4 + pad);
    for (int i = 0; i < m->n_dims; i++)
        bytes += rows * (uint64_t)m->dims[i] * 4 + pad;
    bytes += 2 * (rows * widest_(m) * 4 + pad);
    bytes += rows * VGPU_XENT_STATS * 4 + pad + rows * 4 + pad;
    return bytes;
}

int mlp_init(struct mlp *m, vgpu_t *dev, const int *dims, int n_dims, int max_rows)
{
    TRY(mlp_layout(m, dims, n_dims, max_rows));
    size_t rows = (size_t)max_rows;
    TRY(job_alloc_floats(dev, m->param_count, &m->params));
    TRY(job_alloc_floats(dev, m->param_count, &m->grads));
    for (int i = 0; i < n_dims; i++)
        TRY(job_alloc_floats(dev, rows * (size_t)dims[i], &m->acts[i]));
    for (int i = 0; i < 2; i++)
        TRY(job_alloc_floats(dev, rows * widest_(m), &m->dbuf[i]));
    TRY(job_alloc_floats(dev, rows * VGPU_XENT_STATS, &m->stats));
    void *labels;
    TRY(vgpu_malloc(dev, &labels, rows * sizeof(int32_t)));
    m->labels = labels;
    return 0;
}

void mlp_free(struct mlp *m, vgpu_t *dev)
{
    if (!m || !dev)
        return;
    vgpu_free(dev, m->labels);
    vgpu_free(dev, m->stats);
    for (int i = 1; i >= 0; i--)
        vgpu_free(dev, m->dbuf[i]);
    for (int i = m->n_dims - 1; i >= 0; i--)
        vgpu_free(dev, m->acts[i]);
    vgpu_free(dev, m->grads);
    vgpu_free(dev, m->params);
    memset(m, 0, sizeof *m);
}

void mlp_init_params_host(const struct mlp *m, float *host_params, uint64_t seed)
{
    memset(host_params, 0, m->param_count * sizeof(float));
    for (int l = 0; l < m->n_layers; l++) {
        rng_t r;
        rng_init(&r, seed, 1000 + (uint64_t)l); // one stream per layer: shapes don't shift others
        float std = sqrtf(2.0f / (float)m->dims[l]);
        size_t n = (size_t)m->dims[l] * m->dims[l + 1];
        float *w = host_params + m->w_offset[l];
        for (size_t i = 0; i < n; i++)
            w[i] = std * rng_normal(&r);
    }
}

int mlp_forward(struct mlp *m, vgpu_t *dev, int rows)
{
    if (rows < 0 || rows > m->max_rows)
        return VGPU_EINVAL;
    for (int l = 0; l < m->n_layers; l++) {
        int in = m->dims[l], out = m->dims[l + 1];
        // acts[l+1][rows, out] = acts[l][rows, in] @ W[in, out] + b
        TRY(vgpu_gemm(dev, 0, 0, rows, out, in, 1.0f, m->acts[l], m->params + m->w_offset[l],
                      0.0f, m->acts[l + 1]));
        // + b, and the ReLU of hidden layers, in the same pass.
        TRY(vgpu_bias_add(dev, m->acts[l + 1], m->params + m->b_offset[l], rows, out,
                          l + 1 < m->n_layers));
    }
    return 0;
}

int mlp_eval_stats(struct mlp *m, vgpu_t *dev, int rows)
{
    return vgpu_softmax_xent(dev, NULL, m->stats, m->acts[m->n_layers], m->labels, rows,
                             m->dims[m->n_dims - 1], 0.0f);
}

int mlp_backward(struct mlp *m, vgpu_t *dev, int rows, float grad_scale)
{
    int L = m->n_layers;
    float *dout = m->dbuf[0], *din = m->dbuf[1];
    if (rows == 0) // the gradient of no samples
        return vgpu_memzero(dev, m->grads, m->param_count * sizeof(float));
    // dlogits[rows, classes]
    TRY(vgpu_softmax_xent(dev, dout, m->stats, m->acts[L], m->labels, rows, m->dims[L],
                          grad_scale));
    for (int l = L - 1; l >= 0; l--) {
        int in = m->dims[l], out = m->dims[l + 1];
        if (l + 1 < L) // through the ReLU that produced acts[l+1]
            TRY(vgpu_relu_backward(dev, dout, dout, m->acts[l + 1], (size_t)rows * out));
        // dW[in, out] = acts[l]^T [in, rows] @ dout[rows, out]
        TRY(vgpu_gemm(dev, 1, 0, in, out, rows, 1.0f, m->acts[l], dout, 0.0f,
                      m->grads + m->w_offset[l]));
        TRY(vgpu_bias_grad(dev, m->grads + m->b_offset[l], dout, rows, out));
        if (l > 0) {
            // din[rows, in] = dout[rows, out] @ W^T [out, in]
            TRY(vgpu_gemm(dev, 0, 1, rows, in, out, 1.0f, dout, m->params + m->w_offset[l], 0.0f,
                          din));
            float *t = dout;
            dout = din;
            din = t;
        }
    }
    return 0;
}
