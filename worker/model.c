// model.c: the models this build has, by model.type, and the calls the
// trainer makes through their tables.
#include "model.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "status.h"

// Every model's table (models/<name>/), by model.type: models/models.h's
// list is the only place a model is named.
#define MODEL_EXTERN_(name, text, ops) extern const struct model_ops ops;
MODELS(MODEL_EXTERN_)
#undef MODEL_EXTERN_

#define MODEL_ROW_(name, text, ops) [name] = &ops,
static const struct model_ops *const models_[] = {MODELS(MODEL_ROW_)};
#undef MODEL_ROW_

const struct model_ops *model_find(int type)
{
    if (type < 0 || (size_t)type >= sizeof models_ / sizeof models_[0])
        return NULL;
    return models_[type];
}

const struct model_metrics *model_metrics_for(const struct train_config *cfg)
{
    const struct model_ops *ops = model_find((int)cfg->model.type);
    return ops ? ops->metrics : NULL;
}

const struct model_metrics *model_metrics_of(const struct model *m)
{
    return m->ops->metrics;
}

int model_layout(struct model *m, const struct train_config *cfg, const struct dataset *train,
                 int max_rows)
{
    memset(m, 0, sizeof *m);
    m->ops = model_find((int)cfg->model.type);
    if (!m->ops)
        return VGPU_ECONFIG;
    int rc = m->ops->layout(m, cfg, train, max_rows);
    if (rc < 0)
        model_free(m, NULL);
    return rc;
}

int model_init(struct model *m, vgpu_t *dev, const struct train_config *cfg,
               const struct dataset *train, int max_rows)
{
    TRY(model_layout(m, cfg, train, max_rows));
    return m->ops->alloc(m, dev);
}

void model_free(struct model *m, vgpu_t *dev)
{
    if (!m || !m->ops)
        return;
    m->ops->free(m, dev);
    memset(m, 0, sizeof *m);
}

uint64_t model_device_bytes(const struct model *m, int opt_state_per_param)
{
    return m->ops->device_bytes(m, opt_state_per_param);
}

void model_init_params(const struct model *m, float *host_params, uint64_t seed)
{
    m->ops->init_params(m, host_params, seed);
}

int model_forward(struct model *m, vgpu_t *dev, int rows)
{
    return m->ops->forward(m, dev, rows);
}

int model_backward(struct model *m, vgpu_t *dev, int rows, float grad_scale, float *grads)
{
    return m->ops->backward(m, dev, rows, grad_scale, grads ? grads : m->grads, NULL);
}

int model_backward_telling(struct model *m, vgpu_t *dev, int rows, float grad_scale,
                           const struct grads_ready *ready)
{
    return m->ops->backward(m, dev, rows, grad_scale, m->grads, ready);
}

int model_eval_stats(struct model *m, vgpu_t *dev, int rows)
{
    return m->ops->eval_stats(m, dev, rows);
}

uint64_t model_pass_flops(const struct model *m, int rows, int backward)
{
    return m->ops->pass_flops(m, rows, backward);
}

int model_sample(struct model *m, vgpu_t *dev, const int32_t *prompt, int n_prompt, int32_t *out,
                 int n_out, float temperature, uint64_t seed)
{
    if (!m->ops->sample)
        return VGPU_EUNSUPPORTED;
    if (!prompt || n_prompt < 1 || n_out < 0 || (n_out && !out) || !(temperature >= 0))
        return VGPU_EINVAL;
    return m->ops->sample(m, dev, prompt, n_prompt, out, n_out, temperature, seed);
}

int model_tensor_count(const struct model *m)
{
    return m->ops->tensor_count(m);
}

void model_tensor(const struct model *m, int index, struct model_tensor *out)
{
    memset(out, 0, sizeof *out);
    m->ops->tensor(m, index, out);
}

void model_tensor_shape(const struct model_tensor *t, char *buf, size_t bytes)
{
    if (t->n_dims == 2)
        snprintf(buf, bytes, "%zux%zu", t->dims[0], t->dims[1]);
    else
        snprintf(buf, bytes, "%zu", t->dims[0]);
}
