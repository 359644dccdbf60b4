// model.h: the trainer's model interface: a table of operations each model
// implements, chosen by model.type, over device buffers in a layout every
// model shares, for batches of rows (a row is one sample: an image, or a
// sequence of tokens) whose shape the model declares (struct model_batch),
// with statistics and figures it declares too (model_metrics.h). The trainer
// calls models only through the model_* functions here. Models live in
// models/<name>/ (the MLP: models/mlp/); a new one is its folder, with its
// table, and one line in models/models.h (docs/ARCHITECTURE.md, "The
// trainer", lists what it implements and touches).
#ifndef VGPU_MODEL_H
#define VGPU_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <vgpu/vgpu_math.h>

#include "train_config.h"
#include "dataset.h"
#include "model_metrics.h"

#define MODEL_MAX_SHAPE 18 // numbers a model's shape may have (a checkpoint records them)

struct model_ops;

// Told during a backward pass each time a tail of the gradient is final:
// grads[from, param_count) will not be written again by this pass (its
// kernels are issued on the device's stream; a collective issued after them
// reads their results). Each `from` is below the one before, and the pass
// ends with 0. The trainer starts that tail's all-reduce while the pass goes
// on (train.bucket_mb); a model whose later layers lie at higher offsets
// (layer-major parameters) tells at each layer boundary.
struct grads_ready {
    void (*fn)(void *arg, size_t from);
    void *arg;
};

static inline void grads_ready_tell(const struct grads_ready *r, size_t from)
{
    if (r)
        r->fn(r->arg, from);
}

// What one row of a batch holds on the device (a row is one sample: an
// image, or a sequence of tokens). The trainer stages rows of the data into
// it without knowing which (train_input_path: how a data set's rows reach
// each input type).
enum model_input {
    MODEL_INPUT_F32, // float values: a float set's as they are, or 8-bit codes decoded on the
                     // device by their table
    MODEL_INPUT_I32, // int32 token ids: a token set's, widened on the host
    MODEL_INPUT_U8,  // uint8 token ids: a token set's, as they are
};

struct model_batch {
    enum model_input input;        // the element type of model.input
    int input_width;               // elements a row: an image's features, a sequence's context
    int labels_per_row;            // int32 labels a row: 1 (a class a sample) or input_width
                                   // (one a position: a sequence's next tokens)
};

// One model: its sizes and the device buffers the trainer fills and reads.
// All parameters live in one flat buffer and all gradients in another, so
// one collective covers them. The implementation owns every buffer.
struct model {
    const struct model_ops *ops;   // the implementation
    void *impl;                    // its own state (host)
    int shape[MODEL_MAX_SHAPE];    // the numbers that fix the layout (the MLP: layer widths);
    int n_shape;                   // a checkpoint records them, a resume compares them
    size_t param_count;            // floats in params and in grads
    int max_rows;                  // the largest batch a pass takes, rows (samples)
    struct model_batch batch;      // what a row of input and labels holds
    float *params;                 // device [param_count]
    float *grads;                  // device [param_count]: the gradient of the last backward
    void *input;                   // device [max_rows, batch.input_width] of batch.input's type:
                                   // a batch's rows
    int32_t *labels;               // device [max_rows, batch.labels_per_row]: their labels
    float *stats;                  // device [max_rows, ops->metrics->n_stats]: each row's statistics
};

// A named piece of the flat parameters (a layer's weight or bias), for the
// reports that name parameters: params[offset, offset + dims[0] * ... ).
struct model_tensor {
    char name[32];                 // e.g. "layer0.weight"
    size_t offset;                 // its first float in params
    int n_dims;                    // 1 or 2
    size_t dims[2];                // its shape, row-major, e.g. [in, out] for a weight
};

// What a model implements. Every method is required but `sample`.
struct model_ops {
    const char *name;              // its model.type value
    // What a row of stats holds and the figures made of it (a static table;
    // model_metrics_check passes it).
    const struct model_metrics *metrics;
    // Sizes only, no device work: the shape cfg and the data (features,
    // classes) call for, for batches of up to max_rows; fills m's sizes,
    // m->batch and m->impl. VGPU_EINVAL for a shape this model cannot have.
    int (*layout)(struct model *m, const struct train_config *cfg, const struct dataset *train,
                  int max_rows);
    // Device bytes alloc takes, plus an optimizer with opt_state_per_param
    // floats a parameter (what a memory cap must at least hold): (2 +
    // opt_state_per_param) flat buffers of param_count floats, each rounded
    // up by VGPU_MALLOC_ALIGN, plus the model's other buffers (--plan
    // reports the two parts apart: train_device_parts).
    uint64_t (*device_bytes)(const struct model *m, int opt_state_per_param);
    // After layout: the device buffers (zeroed), m's pointers set.
    int (*alloc)(struct model *m, vgpu_t *dev);
    // Frees the device buffers (dev NULL: none were made) and impl.
    void (*free)(struct model *m, vgpu_t *dev);
    // Initial parameters into a HOST array of param_count floats; a pure
    // function of seed.
    void (*init_params)(const struct model *m, float *host_params, uint64_t seed);
    // Forward pass of `rows` rows in input.
    int (*forward)(struct model *m, vgpu_t *dev, int rows);
    // After forward: the loss on labels, each row's stats, and the gradient of
    // sum(loss) * grad_scale into grads[param_count] (device), overwriting it
    // (zeros when rows is 0), telling `ready` (NULL: nobody) as its tails are
    // final.
    int (*backward)(struct model *m, vgpu_t *dev, int rows, float grad_scale, float *grads,
                    const struct grads_ready *ready);
    // After forward: each row's stats only, no gradient (evaluation).
    int (*eval_stats)(struct model *m, vgpu_t *dev, int rows);
    // The floating-point operations of a forward (backward 0) or backward
    // (1) pass of `rows` samples: its matrix products, a multiply-add
    // counting 2 (elementwise work is left out: it is not what a device's
    // peak FLOP/s measures). The timeline records them; vgpu-project scales
    // compute by them.
    uint64_t (*pass_flops)(const struct model *m, int rows, int backward);
    // The parameter layout: tensors [0, tensor_count) in params order.
    int (*tensor_count)(const struct model *m);
    void (*tensor)(const struct model *m, int index, struct model_tensor *out);
    // Optional (NULL: the model does not generate): a language model's
    // continuation of prompt[0, n_prompt) (n_prompt >= 1), n_out tokens into
    // out (host arrays), each drawn from softmax(logits / temperature) with a
    // random stream of seed (temperature 0: the most likely token). Uses the
    // model's buffers: after training, not between a forward and a backward.
    int (*sample)(struct model *m, vgpu_t *dev, const int32_t *prompt, int n_prompt, int32_t *out,
                  int n_out, float temperature, uint64_t seed);
};

// model.type's table (a value of models/models.h's list), or NULL.
const struct model_ops *model_find(int type);
// The figures of cfg's model.type (before any layout: the summary of a run
// stopped early has them), or NULL.
const struct model_metrics *model_metrics_for(const struct train_config *cfg);
// m's (after model_layout).
const struct model_metrics *model_metrics_of(const struct model *m);

// The model cfg's model.type names (its layout: sizes only, no device work;
// model_free(m, NULL) releases it). Returns 0, VGPU_ECONFIG for a type this
// build has no implementation of, or the implementation's status.
int model_layout(struct model *m, const struct train_config *cfg, const struct dataset *train,
                 int max_rows);
// model_layout, then the device buffers on dev.
int model_init(struct model *m, vgpu_t *dev, const struct train_config *cfg,
               const struct dataset *train, int max_rows);
// Frees what model_layout or model_init made; a zeroed model is a no-op.
void model_free(struct model *m, vgpu_t *dev);

uint64_t model_device_bytes(const struct model *m, int opt_state_per_param);
void model_init_params(const struct model *m, float *host_params, uint64_t seed);
int model_forward(struct model *m, vgpu_t *dev, int rows);
// Into m->grads, or into grads when not NULL (a buffer of param_count floats).
int model_backward(struct model *m, vgpu_t *dev, int rows, float grad_scale, float *grads);
// Into m->grads, telling `ready` as its tails are final (struct grads_ready).
int model_backward_telling(struct model *m, vgpu_t *dev, int rows, float grad_scale,
                           const struct grads_ready *ready);
int model_eval_stats(struct model *m, vgpu_t *dev, int rows);
uint64_t model_pass_flops(const struct model *m, int rows, int backward);
// VGPU_EUNSUPPORTED for a model without `sample`.
int model_sample(struct model *m, vgpu_t *dev, const int32_t *prompt, int n_prompt, int32_t *out,
                 int n_out, float temperature, uint64_t seed);
int model_tensor_count(const struct model *m);
void model_tensor(const struct model *m, int index, struct model_tensor *out);

// "784x256" or "10": a tensor's shape for reports.
void model_tensor_shape(const struct model_tensor *t, char *buf, size_t bytes);

#endif
