// models/mlp/mlp.h: a multi-layer perceptron (Linear -> ReLU ... -> Linear) with
// softmax cross-entropy, on device memory. All parameters live in one flat
// device buffer and all gradients in another, so one collective covers them.
#ifndef VGPU_MLP_H
#define VGPU_MLP_H

#include <stddef.h>
#include <stdint.h>

#include <vgpu/vgpu_math.h>

#include "train_config.h"
#include "dataset.h"
#include "model.h"

#define MLP_MAX_DIMS 18 // input + hidden layers + output

struct mlp {
    int n_dims;                  // layer widths: dims[0] = input, dims[n_dims-1] = classes
    int dims[MLP_MAX_DIMS];
    int n_layers;                // n_dims - 1 linear layers
    size_t w_offset[MLP_MAX_DIMS]; // layer l's weight [dims[l], dims[l+1]] in params, floats
    size_t b_offset[MLP_MAX_DIMS]; // layer l's bias [dims[l+1]], floats
    size_t param_count;          // floats
    int max_rows;                // largest batch a forward pass takes
    float *params;               // device, [param_count]
    float *grads;                // device, [param_count]
    float *acts[MLP_MAX_DIMS];   // device: acts[0] input [rows, dims[0]]; acts[l+1] layer l output
    float *dbuf[2];              // device scratch for activation gradients
    float *stats;                // device, [max_rows, XENT_STATS]
    int32_t *labels;             // device, [max_rows]
};

// The trainer's model as an MLP (model.type = mlp): model.h's table.
extern const struct model_ops model_mlp;

// The layer widths for cfg's model.hidden on the training set: input width,
// the hidden sizes, classes. Returns 0, or VGPU_EINVAL when there are more
// layers than MLP_MAX_DIMS allows.
int mlp_dims_for(const struct train_config *cfg, const struct dataset *train, int *dims, int *n_dims);

// Layout and sizes only (no device work): fills dims and offsets.
// Returns VGPU_EINVAL for a bad shape.
int mlp_layout(struct mlp *m, const int *dims, int n_dims, int max_rows);

// Device bytes mlp_init plus an optimizer with `opt_state_per_param` floats
// per parameter will use (what a memory cap must at least hold).
uint64_t mlp_device_bytes(const struct mlp *layout, int opt_state_per_param);

// Allocates the parameters, gradients and activations on dev (zeroed).
int mlp_init(struct mlp *m, vgpu_t *dev, const int *dims, int n_dims, int max_rows);
void mlp_free(struct mlp *m, vgpu_t *dev);

// He-normal weights (std sqrt(2 / fan_in)) and zero biases into a HOST array
// of param_count floats; a pure function of seed.
void mlp_init_params_host(const struct mlp *m, float *host_params, uint64_t seed);

// Forward pass of `rows` samples already in acts[0]; logits end in acts[n_layers].
int mlp_forward(struct mlp *m, vgpu_t *dev, int rows);

// Loss on the labels already in m->labels, writes stats[rows, XENT_STATS]
// and the gradient of sum(loss) * grad_scale into grads, overwriting them
// (no separate zeroing pass; zeros when rows is 0). grad_scale = 1 / global
// batch makes the all-reduced sum the mean gradient.
int mlp_backward(struct mlp *m, vgpu_t *dev, int rows, float grad_scale);
// The same into grads[param_count] (device) instead of m->grads, telling
// `ready` (NULL: nobody) after each layer, from its weight (struct grads_ready).
int mlp_backward_into(struct mlp *m, vgpu_t *dev, int rows, float grad_scale, float *grads,
                      const struct grads_ready *ready);

// Loss and top-1/top-5 stats only (evaluation), into m->stats.
int mlp_eval_stats(struct mlp *m, vgpu_t *dev, int rows);

#endif
