// train_config.h: vgpu_train's part of the job configuration: [model],
// [train], [data], [checkpoint] and [verify] (libvgpu owns [devices] and
// [comm]: common/config.h). vgpu_train owns the whole file, so a section
// neither part knows is refused here (a typo), while libvgpu leaves it to
// the program.
#ifndef VGPU_TRAIN_CONFIG_H
#define VGPU_TRAIN_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "models/models.h"

#define CONFIG_OPTIMIZERS(X) X(OPTIM_SGD, "sgd") X(OPTIM_ADAM, "adam") X(OPTIM_ADAMW, "adamw")
#define CONFIG_SCHEDULES(X) \
    X(SCHEDULE_CONSTANT, "constant") X(SCHEDULE_STEP, "step") X(SCHEDULE_COSINE, "cosine")
#define CONFIG_BALANCES(X) X(BALANCE_STATIC, "static") X(BALANCE_DYNAMIC, "dynamic")
#define CONFIG_DATASETS(X) \
    X(DATASET_FASHION_MNIST, "fashion-mnist") X(DATASET_MNIST_IDX, "mnist-idx") \
    X(DATASET_SYNTHETIC, "synthetic") X(DATASET_TEXT, "text")

enum optim_kind { CONFIG_OPTIMIZERS(CONFIG_ENUM_CONSTANT) };
enum lr_schedule { CONFIG_SCHEDULES(CONFIG_ENUM_CONSTANT) };
enum batch_balance { CONFIG_BALANCES(CONFIG_ENUM_CONSTANT) };
enum dataset_kind { CONFIG_DATASETS(CONFIG_ENUM_CONSTANT) };
// model.type's values: one per line of models/models.h.
#define CONFIG_MODEL_CONSTANT(name, text, ops) name,
#define CONFIG_MODEL_TEXT(name, text, ops) text,
enum model_kind { MODELS(CONFIG_MODEL_CONSTANT) };

// data.path's default: the Debian package's directory. Only there does a
// missing dataset fall back to the synthetic one (data.fallback_synthetic).
#define TRAIN_DEFAULT_DATA_PATH "/usr/share/datasets/fashion-mnist"
// Text's place when data.path is left at its default (Debian's `fortunes`).
#define TRAIN_DEFAULT_TEXT_PATH "/usr/share/games/fortunes"
#define TRAIN_TEXT_PACKAGE "fortunes"

// Plain old data (broadcast as bytes where needed).
struct train_config {
    struct {
        enum model_kind type;      // the model trained (worker/models/models.h's list)
        struct config_int_list hidden; // hidden layer widths
        long layers, heads, channels, context; // the gpt's
        char init_file[CONFIG_STR_MAX]; // initial parameters (float32, the flat layout); "" = seeded
    } model;
    struct {
        long epochs;
        long batch_size;           // global batch, samples
        long max_steps;            // stop after this many steps; 0 = no limit
        double lr;
        enum optim_kind optimizer; // sgd | adam | adamw
        double momentum;
        double weight_decay;
        double beta1, beta2, eps;  // Adam
        enum lr_schedule schedule; // constant | step | cosine
        long warmup_steps;
        long step_every;           // step schedule: decay period, steps
        double step_gamma;         // step schedule: decay factor
        struct config_float_list batch_weights; // per-rank share of each batch
        enum batch_balance balance; // static | dynamic
        int drop_last;
        int shuffle;               // 1: a permutation an epoch; 0: the rows in file order
        long seed;
        long log_every;            // steps between progress lines
        int deterministic;
        long micro_batches;        // deterministic mode: micro-batches per global batch
        long check_replicas_every; // steps between replica hash checks; 0 = off
        int shard_optimizer;       // optimizer step sharded into the all-reduce (normal mode)
        double grad_clip;          // the summed gradient's largest norm; 0 = no clipping
#define TRAIN_BUCKET_MB_MIN (1.0 / 64) // the smallest bucket_mb but 0
        double bucket_mb;          // normal mode: all-reduce buckets overlapped with the
                                   // backward pass, MiB each; 0 = one all-reduce after it
    } train;
    struct {
        enum dataset_kind dataset; // fashion-mnist | mnist-idx | synthetic | text
        char path[CONFIG_STR_MAX]; // directory with the four IDX files; text: a file or directory
        uint64_t max_bytes;        // bound on the pixels + labels the IDX headers claim, bytes; 0 = none
        int standardize;
        int fallback_synthetic;    // use synthetic data if the dataset is missing
        long train_limit;          // use only the first N training samples; 0 = all
        long synthetic_train;      // synthetic set sizes
        long synthetic_test;
        long synthetic_features;   // synthetic sample width
        double val_fraction;       // text: share of the bytes, at the end, for validation
    } data;
    struct {
        char dir[CONFIG_STR_MAX];  // "" = no checkpoints
        long every_steps;          // 0 = only at the end
        long keep_last;            // newest checkpoints kept (default 3); 0 = all
    } checkpoint;
    struct {
        long bytes;                // tokens (bytes) sampled after training; 0 = none
        double temperature;        // their softmax's temperature; 0 = the most likely
        long seed;
        char prompt[CONFIG_STR_MAX]; // what they continue ("" = a newline)
    } sample;
    struct {
        long steps;                // --verify: steps to replay
        double rtol;               // --verify: relative tolerance (non-deterministic mode)
    } verify;
};

extern const struct config_schema train_config_schema;

// The engine (config.h) over both parts of vgpu_train's file: libvgpu's
// into *vgpu and the trainer's into *tc; vgpu may be NULL (read, checked,
// dropped). A section neither knows is refused.
void train_config_defaults(struct train_config *tc);
int train_config_load_string(struct train_config *tc, struct config *vgpu, const char *text,
                             const char *origin, char *err, size_t err_bytes);
int train_config_load_file(struct train_config *tc, struct config *vgpu, const char *path,
                           char *err, size_t err_bytes);
int train_config_apply_override(struct train_config *tc, struct config *vgpu,
                                const char *assignment, char *err, size_t err_bytes);
int train_config_validate(const struct train_config *tc, char *err, size_t err_bytes);
// The whole way (config_parts_load_job), from the file's text (NULL: none).
int train_config_load_job_text(struct train_config *tc, struct config *vgpu, const char *text,
                               const char *path, const char *const *overrides, int n_overrides,
                               char *err, size_t err_bytes);
// Where the data is read from: data.path, except for text when data.path is
// empty or left at the IDX default (never a text): TRAIN_DEFAULT_TEXT_PATH.
const char *train_data_path(const struct train_config *tc);
// A text set's context, bytes a sequence: model.context (the model's
// positions); the one place the data reads it.
int train_text_context(const struct train_config *tc);
// e.g. train_config_enum_name("train", "optimizer", OPTIM_ADAM) = "adam".
const char *train_config_enum_name(const char *section, const char *key, int value);
// Both parts' keys, libvgpu's first, INI-formatted with their documentation.
void train_config_print_reference(FILE *f);

#endif
