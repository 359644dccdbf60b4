// train_config.c: vgpu_train's part of the job configuration: its schema,
// its rules across keys, and the engine's calls over both parts of the file
// (train_config.h).
#include "train_config.h"

#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "util.h"

static const char *const optimizers_[] = {CONFIG_OPTIMIZERS(CONFIG_ENUM_TEXT) NULL};
static const char *const schedules_[] = {CONFIG_SCHEDULES(CONFIG_ENUM_TEXT) NULL};
static const char *const balances_[] = {CONFIG_BALANCES(CONFIG_ENUM_TEXT) NULL};
static const char *const datasets_[] = {CONFIG_DATASETS(CONFIG_ENUM_TEXT) NULL};
static const char *const models_[] = {MODELS(CONFIG_MODEL_TEXT) NULL};
// The engine stores an enum key's value through an int.
_Static_assert(sizeof(enum optim_kind) == sizeof(int), "enum keys are stored as int");

#define F_(sec, field) offsetof(struct train_config, sec.field)
#define S_(sec, field) sizeof(((struct train_config *)0)->sec.field)
#define BIG 1e18

// The schema: one row per key. The reference printed by --help-config and the
// comments in configs/*.ini come from here.
static const struct config_key keys_[] = {
    {"model", "type", CONFIG_ENUM, F_(model, type), 0, "mlp", 0, 0, models_, MODEL_TYPE_DOC},
    {"model", "hidden", CONFIG_INT_LIST, F_(model, hidden), 0, "256,128", 1, 65536, NULL,
     "hidden layer widths of the MLP, e.g. 256,128"},
    {"model", "layers", CONFIG_INT, F_(model, layers), 0, "2", 1, 64, NULL,
     "gpt: transformer blocks"},
    {"model", "heads", CONFIG_INT, F_(model, heads), 0, "4", 1, 1024, NULL,
     "gpt: attention heads a block (channels a multiple of heads)"},
    {"model", "channels", CONFIG_INT, F_(model, channels), 0, "128", 1, 65536, NULL,
     "gpt: width of the residual stream (the MLP is 4 times as wide)"},
    {"model", "context", CONFIG_INT, F_(model, context), 0, "128", 1, 1 << 20, NULL,
     "gpt: tokens a training sequence (text: bytes; the training and the validation part "
     "each need at least context + 1), and the positions the model has"},
    {"model", "init_file", CONFIG_STR, F_(model, init_file), S_(model, init_file), "", 0, 0, NULL,
     "initial parameters from this file, not drawn from train.seed: the parameter count of "
     "float32 (little-endian, the model's flat layout; NaN or inf refused); empty = drawn"},

    {"train", "epochs", CONFIG_INT, F_(train, epochs), 0, "15", 1, 100000, NULL, "passes over the training set"},
    {"train", "batch_size", CONFIG_INT, F_(train, batch_size), 0, "256", 1, 1 << 24, NULL,
     "global batch in samples, split across ranks"},
    {"train", "max_steps", CONFIG_INT, F_(train, max_steps), 0, "0", 0, BIG, NULL,
     "stop after this many optimizer steps; 0 = no limit"},
    {"train", "lr", CONFIG_FLOAT, F_(train, lr), 0, "0.001", 0, 100, NULL, "peak learning rate"},
    {"train", "optimizer", CONFIG_ENUM, F_(train, optimizer), 0, "adamw", 0, 0, optimizers_, "optimizer"},
    {"train", "momentum", CONFIG_FLOAT, F_(train, momentum), 0, "0.9", 0, 1, NULL, "SGD momentum"},
    {"train", "weight_decay", CONFIG_FLOAT, F_(train, weight_decay), 0, "0", 0, 10, NULL,
     "weight decay (L2 for sgd/adam, decoupled for adamw)"},
    {"train", "beta1", CONFIG_FLOAT, F_(train, beta1), 0, "0.9", 0, 0.9999999, NULL, "Adam beta1"},
    {"train", "beta2", CONFIG_FLOAT, F_(train, beta2), 0, "0.999", 0, 0.9999999, NULL, "Adam beta2"},
    {"train", "eps", CONFIG_FLOAT, F_(train, eps), 0, "1e-8", 1e-30, 1, NULL, "Adam epsilon"},
    {"train", "schedule", CONFIG_ENUM, F_(train, schedule), 0, "constant", 0, 0, schedules_,
     "learning-rate schedule after warm-up"},
    {"train", "warmup_steps", CONFIG_INT, F_(train, warmup_steps), 0, "0", 0, BIG, NULL,
     "linear warm-up from 0 to lr over this many steps"},
    {"train", "step_every", CONFIG_INT, F_(train, step_every), 0, "1000", 1, BIG, NULL,
     "step schedule: multiply lr by step_gamma every this many steps"},
    {"train", "step_gamma", CONFIG_FLOAT, F_(train, step_gamma), 0, "0.1", 0, 1, NULL,
     "step schedule: decay factor"},
    {"train", "batch_weights", CONFIG_FLOAT_LIST, F_(train, batch_weights), 0, "", 0, 1e6, NULL,
     "share of each global batch per rank, e.g. 0.8,0.2; empty = equal"},
    {"train", "balance", CONFIG_ENUM, F_(train, balance), 0, "static", 0, 0, balances_,
     "split of each batch: static = equal or batch_weights; dynamic = re-split "
     "every 10 steps by each rank's measured speed (normal mode; not bitwise reproducible)"},
    {"train", "drop_last", CONFIG_BOOL, F_(train, drop_last), 0, "true", 0, 0, NULL,
     "drop the incomplete last batch of each epoch (false: train on it too)"},
    {"train", "shuffle", CONFIG_BOOL, F_(train, shuffle), 0, "true", 0, 0, NULL,
     "each epoch takes the training rows in a new order drawn from train.seed; false: in file "
     "order, batch i being rows [i*B, (i+1)*B) (B = batch_size), for a program outside to follow"},
    {"train", "seed", CONFIG_INT, F_(train, seed), 0, "1", 0, BIG, NULL,
     "seed for initialisation and shuffling"},
    {"train", "log_every", CONFIG_INT, F_(train, log_every), 0, "50", 1, BIG, NULL,
     "steps between progress lines"},
    {"train", "deterministic", CONFIG_BOOL, F_(train, deterministic), 0, "false", 0, 0, NULL,
     "bitwise-identical results across runs and rank counts"},
    {"train", "micro_batches", CONFIG_INT, F_(train, micro_batches), 0, "8", 1, 4096, NULL,
     "deterministic mode: micro-batches per global batch"},
    {"train", "check_replicas_every", CONFIG_INT, F_(train, check_replicas_every), 0, "100", 0, BIG, NULL,
     "steps between replica hash checks; 0 = off"},
    {"train", "grad_clip", CONFIG_FLOAT, F_(train, grad_clip), 0, "0", 0, 1e30, NULL,
     "clip the summed gradient to this global L2 norm before each step, as PyTorch's "
     "clip_grad_norm_ (the optimizer step is then not sharded); 0 = no clipping"},
    {"train", "bucket_mb", CONFIG_FLOAT, F_(train, bucket_mb), 0, "0", 0, 1024, NULL,
     "all-reduce the gradient in buckets of this many MiB, each as the backward pass finishes "
     "it, beside the pass (normal mode, 2+ ranks; the step is not sharded); 0 = once after it, "
     "else >= 1/64"},
    {"train", "shard_optimizer", CONFIG_BOOL, F_(train, shard_optimizer), 0, "true", 0, 0, NULL,
     "each rank updates 1/N of the parameters inside the all-reduce (normal mode)"},

    {"data", "dataset", CONFIG_ENUM, F_(data, dataset), 0, "fashion-mnist", 0, 0, datasets_,
     "training data (text: data.path's bytes as sequences of model.context bytes with next-byte "
     "labels, for a byte-level model)"},
    {"data", "path", CONFIG_STR, F_(data, path), S_(data, path), TRAIN_DEFAULT_DATA_PATH, 0, 0, NULL,
     "directory of the four MNIST-format IDX files (.gz or plain); text: a file, or a directory's "
     "regular files in name order (not *.dat, not links), this default or empty: "
     TRAIN_DEFAULT_TEXT_PATH},
    {"data", "max_bytes", CONFIG_SIZE, F_(data, max_bytes), 0, "1G", 0, 0, NULL,
     "bound on the pixels and labels the four IDX headers claim together, bytes (Fashion-MNIST: "
     "52.4 MiB), or on 6 a byte of text; more fails before any data is read; 0 = no limit"},
    {"data", "standardize", CONFIG_BOOL, F_(data, standardize), 0, "false", 0, 0, NULL,
     "standardise pixels to zero mean, unit variance (else scale to [0,1])"},
    {"data", "fallback_synthetic", CONFIG_BOOL, F_(data, fallback_synthetic), 0, "true", 0, 0, NULL,
     "use the synthetic dataset (with a warning) if the IDX files are missing at the default "
     "data.path (not for text)"},
    {"data", "train_limit", CONFIG_INT, F_(data, train_limit), 0, "0", 0, BIG, NULL,
     "use only the first N training samples; 0 = all"},
    {"data", "synthetic_train", CONFIG_INT, F_(data, synthetic_train), 0, "8192", 1, 1 << 24, NULL,
     "synthetic dataset: training samples"},
    {"data", "synthetic_test", CONFIG_INT, F_(data, synthetic_test), 0, "2048", 1, 1 << 24, NULL,
     "synthetic dataset: test samples"},
    {"data", "synthetic_features", CONFIG_INT, F_(data, synthetic_features), 0, "784", 1, 1 << 20, NULL,
     "synthetic dataset: values per sample"},
    {"data", "val_fraction", CONFIG_FLOAT, F_(data, val_fraction), 0, "0.1", 0.001, 0.9, NULL,
     "text: the last this share of the bytes, cut at a sequence boundary, is the validation "
     "(test) set; the rest trains"},

    {"checkpoint", "dir", CONFIG_STR, F_(checkpoint, dir), S_(checkpoint, dir), "", 0, 0, NULL,
     "directory for checkpoints; empty = none"},
    {"checkpoint", "every_steps", CONFIG_INT, F_(checkpoint, every_steps), 0, "0", 0, BIG, NULL,
     "steps between checkpoints; 0 = only at the end"},
    {"checkpoint", "keep_last", CONFIG_INT, F_(checkpoint, keep_last), 0, "3", 0, 1000000, NULL,
     "checkpoints to keep, newest first (older ones are removed after each write); 0 = all"},

    {"sample", "bytes", CONFIG_INT, F_(sample, bytes), 0, "0", 0, 1 << 20, NULL,
     "a language model (gpt): bytes of text sampled from it after training (not with --verify) "
     "and printed by rank 0; 0 = none"},
    {"sample", "temperature", CONFIG_FLOAT, F_(sample, temperature), 0, "0.8", 0, 100, NULL,
     "the sampling's softmax temperature (0: always the most likely byte)"},
    {"sample", "seed", CONFIG_INT, F_(sample, seed), 0, "1", 0, BIG, NULL,
     "the sampling's random seed"},
    {"sample", "prompt", CONFIG_STR, F_(sample, prompt), S_(sample, prompt), "", 0, 0, NULL,
     "the text the sample continues (empty: a newline)"},

    {"verify", "steps", CONFIG_INT, F_(verify, steps), 0, "20", 1, BIG, NULL,
     "--verify: steps to run and replay"},
    {"verify", "rtol", CONFIG_FLOAT, F_(verify, rtol), 0, "1e-4", 0, 1, NULL,
     "--verify: relative tolerance outside deterministic mode"},
};

static int validate_(const void *part, char *err, size_t err_bytes)
{
    const struct train_config *tc = part;
    if (tc->data.dataset == DATASET_MNIST_IDX && !tc->data.path[0])
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "data.dataset = mnist-idx needs data.path");
    for (int i = 0; i < tc->train.batch_weights.count; i++)
        if (!(tc->train.batch_weights.v[i] > 0))
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "train.batch_weights: every weight must be > 0");
    if (tc->train.deterministic && tc->train.balance == BALANCE_DYNAMIC)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "train.balance = dynamic splits batches by timing, which train.deterministic "
                           "= true rules out: set one of them");
    if (tc->model.hidden.count == 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "model.hidden: at least one hidden layer is needed");
    // Each bucket is a collective of its own: below 1/64 MiB their latency
    // is all a step would pay.
    if (tc->train.bucket_mb > 0 && tc->train.bucket_mb < TRAIN_BUCKET_MB_MIN)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "train.bucket_mb = %g: 0 (one all-reduce after the pass) or at least "
                           "%g (16 KiB)", tc->train.bucket_mb, TRAIN_BUCKET_MB_MIN);
    return 0;
}

const struct config_schema train_config_schema = {
    .keys = keys_,
    .nkeys = sizeof keys_ / sizeof keys_[0],
    .bytes = sizeof(struct train_config),
    .validate = validate_,
};

// Both parts: libvgpu's first (its rules and messages come first, as when
// libvgpu read the file), then the trainer's. libvgpu's lands in *vgpu, or
// in scratch (from its defaults) when the caller does not keep it.
static void parts_(struct config_part parts[2], struct train_config *tc, struct config *vgpu,
                   struct config *scratch)
{
    if (!vgpu)
        config_defaults(scratch);
    parts[0] = (struct config_part){&config_vgpu_schema, vgpu ? vgpu : scratch};
    parts[1] = (struct config_part){&train_config_schema, tc};
}

void train_config_defaults(struct train_config *tc)
{
    const struct config_part part = {&train_config_schema, tc};
    config_parts_defaults(&part, 1);
}

int train_config_load_string(struct train_config *tc, struct config *vgpu, const char *text,
                             const char *origin, char *err, size_t err_bytes)
{
    struct config scratch;
    struct config_part parts[2];
    parts_(parts, tc, vgpu, &scratch);
    return config_parts_load_text(parts, 2, text, origin, 0, err, err_bytes);
}

int train_config_load_file(struct train_config *tc, struct config *vgpu, const char *path,
                           char *err, size_t err_bytes)
{
    struct config scratch;
    struct config_part parts[2];
    parts_(parts, tc, vgpu, &scratch);
    return config_parts_load_file(parts, 2, path, err, err_bytes);
}

int train_config_apply_override(struct train_config *tc, struct config *vgpu,
                                const char *assignment, char *err, size_t err_bytes)
{
    struct config scratch;
    struct config_part parts[2];
    parts_(parts, tc, vgpu, &scratch);
    return config_parts_override(parts, 2, assignment, 0, err, err_bytes);
}

int train_config_validate(const struct train_config *tc, char *err, size_t err_bytes)
{
    return validate_(tc, err, err_bytes);
}

int train_config_load_job_text(struct train_config *tc, struct config *vgpu, const char *text,
                               const char *path, const char *const *overrides, int n_overrides,
                               char *err, size_t err_bytes)
{
    struct config scratch;
    struct config_part parts[2];
    parts_(parts, tc, vgpu, &scratch);
    return config_parts_load_job(parts, 2, text, path, overrides, n_overrides, 0, err, err_bytes);
}

const char *train_data_path(const struct train_config *tc)
{
    if (tc->data.dataset == DATASET_TEXT &&
        (!tc->data.path[0] || !strcmp(tc->data.path, TRAIN_DEFAULT_DATA_PATH)))
        return TRAIN_DEFAULT_TEXT_PATH;
    return tc->data.path;
}

int train_text_context(const struct train_config *tc)
{
    return (int)tc->model.context;
}

const char *train_config_enum_name(const char *section, const char *key, int value)
{
    return config_schema_enum_name(&train_config_schema, section, key, value);
}

void train_config_print_reference(FILE *f)
{
    struct train_config tc;
    struct config scratch;
    struct config_part parts[2];
    parts_(parts, &tc, NULL, &scratch);
    config_parts_print_reference(parts, 2, f);
}
