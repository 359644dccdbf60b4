// models/gpt/gpt.c: the transformer as the trainer's model (model.h's
// table): its layout from the config, its device buffers, its initial
// parameters, its figures and its tensors. The passes: gpt_pass.c.
#include "gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"
#include "log.h"
#include "rng.h"
#include "status.h"

// A sequence's stats (GPT_STATS, gpt_pass.c): the sums over its positions of
// the loss, the top-1 and the top-5 hits, and the positions themselves, so
// each figure is a mean over positions (not over rows) whatever the context.
static const struct model_metrics gpt_metrics_ = {
    .n_stats = GPT_STATS,
    .n_metrics = 3,
    .metric = {
        {.column = "loss", .train = "loss", .eval = "val_loss", .summary = 1, .sum = 0, .per = 3},
        {.column = "bits_per_byte", .train = "bpb", .eval = "val_bpb", .summary = 1, .sum = 0,
         .per = 3, .scale = 1.4426950408889634}, // 1 / ln 2: bits from nats
        {.column = "accuracy", .train = NULL, .eval = "val_acc", .summary = 0, .sum = 1,
         .per = 3},
    },
};

// ---- sizes ----

static const char *const tensor_names_[GPT_LAYER_TENSORS] = {
    "ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight",
    "attn.proj.bias", "ln2.weight", "ln2.bias", "mlp.fc.weight", "mlp.fc.bias",
    "mlp.proj.weight", "mlp.proj.bias",
};

// A layer tensor's shape: [rows, cols], cols 0 for a vector.
static void tensor_shape_(const struct gpt *g, enum gpt_tensor t, size_t *rows, size_t *cols)
{
    const size_t C = (size_t)g->C;
    static const int out_[GPT_LAYER_TENSORS] = {1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 1, 1};
    static const int in_[GPT_LAYER_TENSORS] = {0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 4, 0};
    *rows = (size_t)out_[t] * C;
    *cols = (size_t)in_[t] * C;
}

static int layout_(struct gpt *g, const struct train_config *cfg, const struct dataset *train,
                   int max_rows)
{
    g->L = (int)cfg->model.layers;
    g->NH = (int)cfg->model.heads;
    g->C = (int)cfg->model.channels;
    g->T = (int)cfg->model.context;
    g->V = train->classes;
    g->max_rows = max_rows;
    if (!train->tokens || dataset_label_width(train) != train->features) {
        log_error("model.type = gpt trains on token sequences (data.dataset = text)");
        return VGPU_EINVAL;
    }
    if (train->features != g->T) {
        log_error("model.context = %d, but the data's sequences hold %d tokens", g->T,
                  train->features);
        return VGPU_EINVAL;
    }
    if ((int64_t)max_rows * g->T * 4 * g->C > INT32_MAX) { // the passes index rows by int
        log_error("model: %d sequences of %d positions at %d channels: the MLP's activations "
                  "pass 2^31 floats (the passes count them in int); fewer rows a rank",
                  max_rows, g->T, g->C);
        return VGPU_EINVAL;
    }
    if (g->L < 1 || g->L > GPT_MAX_LAYERS || g->NH < 1 || g->C % g->NH || g->V < 1) {
        log_error("model: %d layers (1 to %d), %d channels in %d heads (channels a multiple "
                  "of heads)", g->L, GPT_MAX_LAYERS, g->C, g->NH);
        return VGPU_EINVAL;
    }
    size_t at = 0;
    for (int t = 0; t < GPT_LAYER_TENSORS; t++) {
        size_t rows, cols;
        tensor_shape_(g, (enum gpt_tensor)t, &rows, &cols);
        g->tensor_offset[t] = at;
        g->tensor_floats[t] = rows * (cols ? cols : 1);
        at += g->tensor_floats[t];
    }
    g->layer_floats = at;
    g->param_count = gpt_lnf(g) + 2 * (size_t)g->C;
    return 0;
}

// The activations' and the backward scratch's buffers within their two
// blocks, each at a multiple of 64 floats (a GPU's 256-byte alignment):
// counts the floats when base is NULL, else points g's buffers into base.
#define CARVE_(ptr, count)                                                                 \
    do {                                                                                   \
        if (base)                                                                          \
            (ptr) = (void *)(base + at);                                                   \
        at += ((size_t)(count) + 63) / 64 * 64;                                            \
    } while (0)

static size_t carve_acts_(struct gpt *g, float *base)
{
    const size_t BT = (size_t)g->max_rows * (size_t)g->T, C = (size_t)g->C;
    const size_t att = (size_t)g->max_rows * (size_t)g->NH * (size_t)g->T * (size_t)g->T;
    size_t at = 0;
    CARVE_(g->encoded, BT * C);
    for (int l = 0; l < g->L; l++) {
        struct gpt_layer_acts *a = &g->layer[l];
        CARVE_(a->ln1, BT * C);
        CARVE_(a->ln1_mean, BT);
        CARVE_(a->ln1_rstd, BT);
        CARVE_(a->qkv, BT * 3 * C);
        CARVE_(a->att, att);
        CARVE_(a->atty, BT * C);
        CARVE_(a->res2, BT * C);
        CARVE_(a->ln2, BT * C);
        CARVE_(a->ln2_mean, BT);
        CARVE_(a->ln2_rstd, BT);
        CARVE_(a->fch, BT * 4 * C);
        CARVE_(a->fch_gelu, BT * 4 * C);
        CARVE_(a->res3, BT * C);
    }
    CARVE_(g->lnf, BT * C);
    CARVE_(g->lnf_mean, BT);
    CARVE_(g->lnf_rstd, BT);
    CARVE_(g->logits, BT * (size_t)g->V);
    CARVE_(g->xent, BT * XENT_STATS);
    return at;
}

static size_t carve_scratch_(struct gpt *g, float *base)
{
    const size_t BT = (size_t)g->max_rows * (size_t)g->T, C = (size_t)g->C;
    size_t at = 0;
    CARVE_(g->dres, BT * C);
    CARVE_(g->dln, BT * C);
    CARVE_(g->dfch, BT * 4 * C);
    CARVE_(g->dqkv, BT * 3 * C);
    CARVE_(g->datt, (size_t)g->max_rows * (size_t)g->NH * (size_t)g->T * (size_t)g->T);
    return at;
}

#undef CARVE_

// ---- the model's table ----

static int model_layout_(struct model *m, const struct train_config *cfg,
                         const struct dataset *train, int max_rows)
{
    struct gpt *g = calloc(1, sizeof *g);
    if (!g)
        return VGPU_ENOMEM;
    m->impl = g;
    TRY(layout_(g, cfg, train, max_rows));
    g->acts_floats = carve_acts_(g, NULL);
    g->scratch_floats = carve_scratch_(g, NULL);
    m->shape[0] = g->L;
    m->shape[1] = g->NH;
    m->shape[2] = g->C;
    m->shape[3] = g->T;
    m->shape[4] = g->V;
    m->n_shape = 5;
    m->param_count = g->param_count;
    m->max_rows = max_rows;
    // A sequence of T token ids a row, and the next token at each position.
    m->batch = (struct model_batch){.input = MODEL_INPUT_I32, .input_width = g->T,
                                    .labels_per_row = g->T};
    return 0;
}

static uint64_t model_device_bytes_(const struct model *m, int opt_state_per_param)
{
    const struct gpt *g = m->impl;
    const uint64_t pad = VGPU_MALLOC_ALIGN, rows = (uint64_t)g->max_rows;
    uint64_t bytes = (2 + (uint64_t)opt_state_per_param) * (g->param_count * 4 + pad);
    bytes += 2 * (rows * (uint64_t)g->T * 4 + pad);      // tokens, labels
    bytes += rows * GPT_STATS * 4 + pad;                 // stats
    bytes += (g->acts_floats + g->scratch_floats) * 4 + 2 * pad;
    return bytes;
}

static int model_alloc_(struct model *m, vgpu_t *dev)
{
    struct gpt *g = m->impl;
    const size_t rows = (size_t)g->max_rows;
    void *p;
    TRY(job_alloc_floats(dev, g->param_count, &g->params));
    TRY(job_alloc_floats(dev, g->param_count, &g->grads));
    TRY(vgpu_malloc(dev, &p, rows * (size_t)g->T * sizeof(int32_t)));
    g->tokens = p;
    TRY(vgpu_malloc(dev, &p, rows * (size_t)g->T * sizeof(int32_t)));
    g->labels = p;
    TRY(job_alloc_floats(dev, rows * GPT_STATS, &g->stats));
    TRY(job_alloc_floats(dev, g->acts_floats, &g->acts_block));
    TRY(job_alloc_floats(dev, g->scratch_floats, &g->scratch_block));
    carve_acts_(g, g->acts_block);
    carve_scratch_(g, g->scratch_block);
    m->params = g->params;
    m->grads = g->grads;
    m->input = g->tokens;
    m->labels = g->labels;
    m->stats = g->stats;
    return 0;
}

static void model_free_(struct model *m, vgpu_t *dev)
{
    struct gpt *g = m->impl;
    if (g && dev) {
        float *const bufs[] = {g->scratch_block, g->acts_block, g->stats, (float *)g->labels,
                               (float *)g->tokens, g->grads, g->params};
        for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
            vgpu_free(dev, bufs[i]);
    }
    free(g);
    m->impl = NULL;
}

// GPT-2's: weights and embeddings normal(0, 0.02), the two projections into
// the residual stream scaled by 1/sqrt(2L) (each layer adds two), biases 0,
// LayerNorms the identity. One random stream a tensor, so that one tensor's
// shape does not shift another's values.
static void fill_normal_(float *w, size_t n, float std, uint64_t seed, uint64_t stream)
{
    rng_t r;
    rng_init(&r, seed, stream);
    for (size_t i = 0; i < n; i++)
        w[i] = std * rng_normal(&r);
}

static void model_init_params_(const struct model *m, float *host, uint64_t seed)
{
    const struct gpt *g = m->impl;
    const size_t C = (size_t)g->C;
    const float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)g->L);
    memset(host, 0, g->param_count * sizeof(float));
    fill_normal_(host + gpt_wte(g), (size_t)g->V * C, std, seed, 2000);
    fill_normal_(host + gpt_wpe(g), (size_t)g->T * C, std, seed, 2001);
    for (int l = 0; l < g->L; l++) {
        const uint64_t stream = 3000 + 16 * (uint64_t)l;
        for (size_t i = 0; i < C; i++) {
            host[gpt_layer_param(g, l, GPT_LN1_W) + i] = 1.0f;
            host[gpt_layer_param(g, l, GPT_LN2_W) + i] = 1.0f;
        }
        fill_normal_(host + gpt_layer_param(g, l, GPT_QKV_W), g->tensor_floats[GPT_QKV_W], std,
                     seed, stream + GPT_QKV_W);
        fill_normal_(host + gpt_layer_param(g, l, GPT_PROJ_W), g->tensor_floats[GPT_PROJ_W],
                     proj_std, seed, stream + GPT_PROJ_W);
        fill_normal_(host + gpt_layer_param(g, l, GPT_FC_W), g->tensor_floats[GPT_FC_W], std,
                     seed, stream + GPT_FC_W);
        fill_normal_(host + gpt_layer_param(g, l, GPT_FCPROJ_W),
                     g->tensor_floats[GPT_FCPROJ_W], proj_std, seed, stream + GPT_FCPROJ_W);
    }
    for (size_t i = 0; i < C; i++)
        host[gpt_lnf(g) + i] = 1.0f;
}

static int model_forward_(struct model *m, vgpu_t *dev, int rows)
{
    return gpt_forward(m->impl, dev, rows);
}

static int model_backward_(struct model *m, vgpu_t *dev, int rows, float grad_scale, float *grads,
                           const struct grads_ready *ready)
{
    return gpt_backward(m->impl, dev, rows, grad_scale, grads, ready);
}

static int model_eval_stats_(struct model *m, vgpu_t *dev, int rows)
{
    return gpt_eval_stats(m->impl, dev, rows);
}

static int model_sample_(struct model *m, vgpu_t *dev, const int32_t *prompt, int n_prompt,
                         int32_t *out, int n_out, float temperature, uint64_t seed)
{
    return gpt_sample(m->impl, dev, prompt, n_prompt, out, n_out, temperature, seed);
}

// The matrix products of a pass over `rows` sequences, a multiply-add
// counting 2: per position and layer the four linear layers (12 C^2
// multiply-adds) and attention's two products over the positions each
// position sees (causal: t + 1 of them, (T + 1) / 2 on average, C wide
// each); then the output projection (C V). The backward pass takes each
// product's two gradients: twice the forward's.
static uint64_t model_pass_flops_(const struct model *m, int rows, int backward)
{
    const struct gpt *g = m->impl;
    const uint64_t C = (uint64_t)g->C, T = (uint64_t)g->T;
    const uint64_t seq_layer = T * 12 * C * C + T * (T + 1) / 2 * C * 2;
    const uint64_t fwd = 2 * (uint64_t)rows * ((uint64_t)g->L * seq_layer + T * C * (uint64_t)g->V);
    return backward ? 2 * fwd : fwd;
}

static int model_tensor_count_(const struct model *m)
{
    const struct gpt *g = m->impl;
    return 2 + g->L * GPT_LAYER_TENSORS + 2;
}

static void model_tensor_(const struct model *m, int index, struct model_tensor *out)
{
    const struct gpt *g = m->impl;
    const int layer_end = 2 + g->L * GPT_LAYER_TENSORS;
    size_t rows = (size_t)g->C, cols = 0;
    if (index < 2) {
        snprintf(out->name, sizeof out->name, "%s", index ? "wpe" : "wte");
        out->offset = index ? gpt_wpe(g) : gpt_wte(g);
        rows = index ? (size_t)g->T : (size_t)g->V;
        cols = (size_t)g->C;
    } else if (index < layer_end) {
        const int l = (index - 2) / GPT_LAYER_TENSORS;
        const enum gpt_tensor t = (enum gpt_tensor)((index - 2) % GPT_LAYER_TENSORS);
        snprintf(out->name, sizeof out->name, "h%d.%s", l, tensor_names_[t]);
        out->offset = gpt_layer_param(g, l, t);
        tensor_shape_(g, t, &rows, &cols);
    } else {
        snprintf(out->name, sizeof out->name, "ln_f.%s", index > layer_end ? "bias" : "weight");
        out->offset = gpt_lnf(g) + (index > layer_end ? (size_t)g->C : 0);
    }
    out->n_dims = cols ? 2 : 1;
    out->dims[0] = rows;
    out->dims[1] = cols;
}

const struct model_ops model_gpt = {
    .name = "gpt",
    .metrics = &gpt_metrics_,
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
    .sample = model_sample_,
};
