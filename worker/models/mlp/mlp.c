// models/mlp/mlp.c: MLP forward and backward on device ops, and the MLP as the
// trainer's model (model.h's table, model_mlp).
#include "mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "log.h"
#include "rng.h"

int mlp_dims_for(const struct train_config *cfg, const struct dataset *train, int *dims, int *n_dims)
{
    int n = 0;
    dims[n++] = train->features;
    for (int i = 0; i < cfg->model.hidden.count; i++) {
        if (n >= MLP_MAX_DIMS - 1)
            return VGPU_EINVAL;
        dims[n++] = (int)cfg->model.hidden.v[i];
    }
    dims[n++] = train->classes;
    *n_dims = n;
    return 0;
}

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
    bytes += rows * XENT_STATS * 4 + pad + rows * 4 + pad;
    return bytes;
}

// The device buffers of a laid-out model.
static int alloc_(struct mlp *m, vgpu_t *dev)
{
    size_t rows = (size_t)m->max_rows;
    TRY(job_alloc_floats(dev, m->param_count, &m->params));
    TRY(job_alloc_floats(dev, m->param_count, &m->grads));
    for (int i = 0; i < m->n_dims; i++)
        TRY(job_alloc_floats(dev, rows * (size_t)m->dims[i], &m->acts[i]));
    for (int i = 0; i < 2; i++)
        TRY(job_alloc_floats(dev, rows * widest_(m), &m->dbuf[i]));
    TRY(job_alloc_floats(dev, rows * XENT_STATS, &m->stats));
    void *labels;
    TRY(vgpu_malloc(dev, &labels, rows * sizeof(int32_t)));
    m->labels = labels;
    return 0;
}

int mlp_init(struct mlp *m, vgpu_t *dev, const int *dims, int n_dims, int max_rows)
{
    TRY(mlp_layout(m, dims, n_dims, max_rows));
    return alloc_(m, dev);
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
    device_t *d = vgpu_math_device(dev);
    for (int l = 0; l < m->n_layers; l++) {
        int in = m->dims[l], out = m->dims[l + 1];
        // acts[l+1][rows, out] = acts[l][rows, in] @ W[in, out] + b
        TRY(math_gemm(d, 0, 0, rows, out, in, 1.0f, m->acts[l], m->params + m->w_offset[l],
                      0.0f, m->acts[l + 1]));
        // + b, and the ReLU of hidden layers, in the same pass.
        TRY(math_bias_add(d, m->acts[l + 1], m->params + m->b_offset[l], rows, out,
                          l + 1 < m->n_layers));
    }
    return 0;
}

int mlp_eval_stats(struct mlp *m, vgpu_t *dev, int rows)
{
    device_t *d = vgpu_math_device(dev);
    return math_softmax_xent(d, NULL, m->stats, m->acts[m->n_layers], m->labels, rows,
                             m->dims[m->n_dims - 1], 0.0f);
}

int mlp_backward(struct mlp *m, vgpu_t *dev, int rows, float grad_scale)
{
    return mlp_backward_into(m, dev, rows, grad_scale, m->grads, NULL);
}

int mlp_backward_into(struct mlp *m, vgpu_t *dev, int rows, float grad_scale, float *grads,
                      const struct grads_ready *ready)
{
    int L = m->n_layers;
    float *dout = m->dbuf[0], *din = m->dbuf[1];
    device_t *d = vgpu_math_device(dev);
    if (rows == 0) { // the gradient of no samples
        TRY(vgpu_memzero(dev, grads, m->param_count * sizeof(float)));
        grads_ready_tell(ready, 0);
        return 0;
    }
    // dlogits[rows, classes]
    TRY(math_softmax_xent(d, dout, m->stats, m->acts[L], m->labels, rows, m->dims[L],
                          grad_scale));
    for (int l = L - 1; l >= 0; l--) {
        int in = m->dims[l], out = m->dims[l + 1];
        if (l + 1 < L) // through the ReLU that produced acts[l+1]
            TRY(math_relu_backward(d, dout, dout, m->acts[l + 1], (size_t)rows * out));
        // dW[in, out] = acts[l]^T [in, rows] @ dout[rows, out]
        TRY(math_gemm(d, 1, 0, in, out, rows, 1.0f, m->acts[l], dout, 0.0f,
                      grads + m->w_offset[l]));
        TRY(math_bias_grad(d, grads + m->b_offset[l], dout, rows, out));
        grads_ready_tell(ready, m->w_offset[l]); // layer l's weight, then its bias
        if (l > 0) {
            // din[rows, in] = dout[rows, out] @ W^T [out, in]
            TRY(math_gemm(d, 0, 1, rows, in, out, 1.0f, dout, m->params + m->w_offset[l], 0.0f,
                          din));
            float *t = dout;
            dout = din;
            din = t;
        }
    }
    return 0;
}

// ---- the MLP as the trainer's model ----

_Static_assert(MLP_MAX_DIMS <= MODEL_MAX_SHAPE, "a model's shape holds the MLP's layer widths");

static int model_layout_(struct model *m, const struct train_config *cfg, const struct dataset *train,
                         int max_rows)
{
    int dims[MLP_MAX_DIMS], n;
    int rc = mlp_dims_for(cfg, train, dims, &n);
    if (rc < 0)
        return rc;
    struct mlp *mlp = calloc(1, sizeof *mlp);
    if (!mlp)
        return VGPU_ENOMEM;
    m->impl = mlp;
    rc = mlp_layout(mlp, dims, n, max_rows);
    if (rc < 0)
        return rc;
    memcpy(m->shape, dims, (size_t)n * sizeof *dims);
    m->n_shape = n;
    m->param_count = mlp->param_count;
    m->max_rows = max_rows;
    // An image's values a row, and its class.
    m->batch = (struct model_batch){.input = MODEL_INPUT_F32, .input_width = dims[0],
                                    .labels_per_row = 1};
    return 0;
}

static uint64_t model_device_bytes_(const struct model *m, int opt_state_per_param)
{
    return mlp_device_bytes(m->impl, opt_state_per_param);
}

static int model_alloc_(struct model *m, vgpu_t *dev)
{
    struct mlp *mlp = m->impl;
    TRY(alloc_(mlp, dev));
    m->params = mlp->params;
    m->grads = mlp->grads;
    m->input = mlp->acts[0];
    m->labels = mlp->labels;
    m->stats = mlp->stats;
    return 0;
}

static void model_free_(struct model *m, vgpu_t *dev)
{
    if (dev)
        mlp_free(m->impl, dev);
    free(m->impl);
    m->impl = NULL;
}

static void model_init_params_(const struct model *m, float *host_params, uint64_t seed)
{
    mlp_init_params_host(m->impl, host_params, seed);
}

static int model_forward_(struct model *m, vgpu_t *dev, int rows)
{
    return mlp_forward(m->impl, dev, rows);
}

static int model_backward_(struct model *m, vgpu_t *dev, int rows, float grad_scale, float *grads,
                           const struct grads_ready *ready)
{
    return mlp_backward_into(m->impl, dev, rows, grad_scale, grads, ready);
}

static int model_eval_stats_(struct model *m, vgpu_t *dev, int rows)
{
    return mlp_eval_stats(m->impl, dev, rows);
}

// mlp_forward's products: acts[l] @ W[l] per layer; mlp_backward_into's:
// dW[l] per layer and din for every layer but the first.
static uint64_t model_pass_flops_(const struct model *m, int rows, int backward)
{
    const struct mlp *mlp = m->impl;
    uint64_t flops = 0;
    for (int l = 0; l < mlp->n_layers; l++) {
        const uint64_t product = 2ull * (uint64_t)rows * (uint64_t)mlp->dims[l] *
                                 (uint64_t)mlp->dims[l + 1];
        flops += !backward ? product : l > 0 ? 2 * product : product;
    }
    return flops;
}

// A weight then a bias per layer, as mlp_layout places them.
static int model_tensor_count_(const struct model *m)
{
    const struct mlp *mlp = m->impl;
    return 2 * mlp->n_layers;
}

static void model_tensor_(const struct model *m, int index, struct model_tensor *out)
{
    const struct mlp *mlp = m->impl;
    const int l = index / 2, bias = index % 2;
    const size_t in = (size_t)mlp->dims[l], width = (size_t)mlp->dims[l + 1];
    snprintf(out->name, sizeof out->name, "layer%d.%s", l, bias ? "bias" : "weight");
    out->offset = bias ? mlp->b_offset[l] : mlp->w_offset[l];
    out->n_dims = bias ? 1 : 2;
    out->dims[0] = bias ? width : in;
    out->dims[1] = bias ? 0 : width;
}

const struct model_ops model_mlp = {
    .name = "mlp",
    .metrics = &model_metrics_xent, // its stats are softmax_xent's
    .layout = model_layout_,
    .device_bytes = model_device_bytes_,
    .alloc = model_alloc_,
    .free = model_free_,
    .init_params = model_init_params_,
    .forward = model_forward_,
    .backward = model_backward_,
    .eval_stats = model_eval_stats_,
    .pass_flops = model_pass_flops_,
    .tensor_count = model_tensor_count_,
    .tensor = model_tensor_,
};
