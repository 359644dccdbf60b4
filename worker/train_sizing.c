// train_sizing.c: the sizes of a training job's pieces (pure).
#include "train_sizing.h"

#include <vgpu/vgpu_ext.h> // vgpu_tree_scratch_bytes

#include <string.h>

#include "balance.h"
#include "model.h"
#include "optim.h"
#include "sampler.h"
#include "status.h"

long train_micro_rows(const struct train_config *cfg)
{
    return (cfg->train.batch_size + cfg->train.micro_batches - 1) / cfg->train.micro_batches;
}

void train_micro_split(const struct train_config *cfg, int nranks, int *per_rank)
{
    long counts[TRAIN_MAX_RANKS], offsets[TRAIN_MAX_RANKS];
    sampler_split(cfg->train.micro_batches, nranks, cfg->train.batch_weights.v,
                  cfg->train.batch_weights.count, counts, offsets);
    for (int r = 0; r < nranks; r++)
        per_rank[r] = (int)counts[r];
}

// The static split of a full batch: counts[nranks] (nranks <= TRAIN_MAX_RANKS).
static void batch_split_(const struct train_config *cfg, int nranks, long *counts)
{
    long offsets[TRAIN_MAX_RANKS];
    sampler_split(cfg->train.batch_size, nranks, cfg->train.batch_weights.v,
                  cfg->train.batch_weights.count, counts, offsets);
}

long train_rank_rows(const struct train_config *cfg, int nranks, int rank)
{
    if (cfg->train.deterministic)
        return train_micro_rows(cfg);
    long counts[TRAIN_MAX_RANKS];
    batch_split_(cfg, nranks, counts);
    return counts[rank];
}

long train_eval_rows(int label_width)
{
    if (label_width <= 1)
        return EVAL_CHUNK;
    return EVAL_CHUNK_LABELS / label_width > 1 ? EVAL_CHUNK_LABELS / label_width : 1;
}

int train_max_rows(const struct train_config *cfg, int nranks, int label_width)
{
    long most = 1;
    if (cfg->train.deterministic) {
        most = train_micro_rows(cfg);
    } else if (nranks > TRAIN_MAX_RANKS) { // the split is only needed for its maximum
        most = cfg->train.batch_size;
    } else {
        long counts[TRAIN_MAX_RANKS];
        batch_split_(cfg, nranks, counts);
        for (int r = 0; r < nranks; r++)
            most = counts[r] > most ? counts[r] : most;
        if (cfg->train.balance == BALANCE_DYNAMIC)
            most = balance_max_rows(cfg->train.batch_size, nranks, counts);
    }
    // Evaluation runs in chunks through the same buffers.
    const long eval = train_eval_rows(label_width);
    return (int)(most > eval ? most : eval);
}

long train_staging_rows(const struct train_config *cfg, int max_rows, int verify)
{
    return verify && cfg->train.batch_size > max_rows ? cfg->train.batch_size : max_rows;
}

int train_input_path(const struct model_batch *b, const struct dataset *ds)
{
    if (b->input_width != ds->features || b->labels_per_row != dataset_label_width(ds))
        return VGPU_EINVAL;
    switch (b->input) {
    case MODEL_INPUT_F32:
        return ds->tokens ? VGPU_EINVAL : ds->codes ? TRAIN_INPUT_DECODE : TRAIN_INPUT_COPY;
    case MODEL_INPUT_I32:
        return ds->tokens ? TRAIN_INPUT_WIDEN : VGPU_EINVAL;
    case MODEL_INPUT_U8:
        return ds->tokens ? TRAIN_INPUT_TOKENS : VGPU_EINVAL;
    }
    return VGPU_EINVAL;
}

void train_device_parts(const struct train_config *cfg, const struct dataset *train, int nranks,
                        int verify, struct train_bytes *out)
{
    struct model layout;
    memset(out, 0, sizeof *out);
    if (nranks > TRAIN_MAX_RANKS ||
        model_layout(&layout, cfg, train,
                     train_max_rows(cfg, nranks, dataset_label_width(train))) < 0)
        return;
    const int path = train_input_path(&layout.batch, train);
    if (path < 0) {
        model_free(&layout, NULL);
        return;
    }
    const int state = optim_state_per_param(cfg->train.optimizer);
    const uint64_t param_bytes = layout.param_count * sizeof(float);
    const uint64_t buffer = param_bytes + VGPU_MALLOC_ALIGN; // one flat buffer, rounded
    const uint64_t model = model_device_bytes(&layout, state);
    out->param_count = layout.param_count;
    out->params = out->grads = buffer;
    out->optimizer = (uint64_t)state * buffer;
    out->activations = model - (2 + (uint64_t)state) * buffer;
    if (path == TRAIN_INPUT_DECODE) // the batch's codes and their value table
        out->staging = (uint64_t)train_staging_rows(cfg, layout.max_rows, verify) *
                           (uint64_t)train->features +
                       VGPU_MALLOC_ALIGN + sizeof train->lut + VGPU_MALLOC_ALIGN;
    if (cfg->train.deterministic) { // this rank's micro-batch gradients, the tree's scratch
        int per_rank[TRAIN_MAX_RANKS], most = 0;
        train_micro_split(cfg, nranks, per_rank);
        for (int r = 0; r < nranks; r++)
            most = per_rank[r] > most ? per_rank[r] : most;
        out->deterministic = (uint64_t)most * param_bytes + VGPU_MALLOC_ALIGN +
                             vgpu_tree_scratch_bytes(nranks, most, layout.param_count) +
                             VGPU_MALLOC_ALIGN;
    }
    if (verify) { // rank 0's single-device replay: a second model and optimizer
        struct model ref;
        long rows = cfg->train.deterministic ? train_micro_rows(cfg) : cfg->train.batch_size;
        if (model_layout(&ref, cfg, train, (int)rows) < 0) {
            model_free(&layout, NULL);
            memset(out, 0, sizeof *out);
            return;
        }
        out->verify = model_device_bytes(&ref, state);
        model_free(&ref, NULL);
        if (cfg->train.deterministic)
            out->verify += (uint64_t)cfg->train.micro_batches * param_bytes + VGPU_MALLOC_ALIGN;
    }
    model_free(&layout, NULL);
    out->total = model + out->staging + out->deterministic + out->verify;
}

uint64_t train_device_bytes(const struct train_config *cfg, const struct dataset *train, int nranks,
                            int verify)
{
    struct train_bytes parts;
    train_device_parts(cfg, train, nranks, verify, &parts);
    return parts.total;
}

uint64_t train_largest_collective_bytes(const struct train_config *cfg, const struct dataset *train)
{
    struct model layout;
    if (model_layout(&layout, cfg, train, 1) < 0)
        return 0;
    const int state = optim_state_per_param(cfg->train.optimizer);
    const uint64_t params = layout.param_count;
    model_free(&layout, NULL);
    return params * sizeof(float) * (uint64_t)(state > 1 ? state : 1);
}
