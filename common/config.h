// config.h: the job configuration: INI files plus --set overrides, checked
// against one schema table that also documents every key.
#ifndef VGPU_CONFIG_H
#define VGPU_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CONFIG_LIST_MAX 16
#define CONFIG_STR_MAX 256   // bytes of a string key's field, with its '\0'
#define CONFIG_VALUE_MAX 511 // characters of one value from --set or the environment

struct config_int_list {
    int count;
    long v[CONFIG_LIST_MAX];
};

struct config_float_list {
    int count;
    double v[CONFIG_LIST_MAX];
};

// Keys with a fixed set of values are stored as enums. Each list gives the
// enum constant and the text a config file uses, in the enum's order.
#define CONFIG_DEVICE_KINDS(X) X(DEVICE_KIND_AUTO, "auto") X(DEVICE_KIND_CPU, "cpu") X(DEVICE_KIND_CUDA, "cuda")
#define CONFIG_BACKENDS(X) \
    X(BACKEND_AUTO, "auto") X(BACKEND_RING, "ring") X(BACKEND_MPI, "mpi") X(BACKEND_NCCL, "nccl")
#define CONFIG_OPTIMIZERS(X) X(OPTIM_SGD, "sgd") X(OPTIM_ADAM, "adam") X(OPTIM_ADAMW, "adamw")
#define CONFIG_SCHEDULES(X) \
    X(SCHEDULE_CONSTANT, "constant") X(SCHEDULE_STEP, "step") X(SCHEDULE_COSINE, "cosine")
#define CONFIG_BALANCES(X) X(BALANCE_STATIC, "static") X(BALANCE_DYNAMIC, "dynamic")
#define CONFIG_MODELS(X) X(MODEL_MLP, "mlp")
#define CONFIG_DATASETS(X) \
    X(DATASET_FASHION_MNIST, "fashion-mnist") X(DATASET_MNIST_IDX, "mnist-idx") X(DATASET_SYNTHETIC, "synthetic")

#define CONFIG_ENUM_CONSTANT_(name, text) name,
enum device_kind { CONFIG_DEVICE_KINDS(CONFIG_ENUM_CONSTANT_) };
enum comm_backend_choice { CONFIG_BACKENDS(CONFIG_ENUM_CONSTANT_) };
enum optim_kind { CONFIG_OPTIMIZERS(CONFIG_ENUM_CONSTANT_) };
enum lr_schedule { CONFIG_SCHEDULES(CONFIG_ENUM_CONSTANT_) };
enum batch_balance { CONFIG_BALANCES(CONFIG_ENUM_CONSTANT_) };
enum dataset_kind { CONFIG_DATASETS(CONFIG_ENUM_CONSTANT_) };
enum model_kind { CONFIG_MODELS(CONFIG_ENUM_CONSTANT_) };
#undef CONFIG_ENUM_CONSTANT_

// Plain old data: the launcher broadcasts it from rank 0 as bytes.
struct config {
    struct {
        enum device_kind kind;     // auto | cpu | cuda
        long ranks_per_device;     // ranks sharing one device; 0 = auto
        uint64_t memory_limit;     // bytes per rank; 0 = auto
        double memory_fraction;    // share of free device memory per device; 0 = unset
        struct config_int_list map; // explicit local rank -> device index
        long cpu_threads;          // BLAS threads per rank; 0 = auto
    } devices;
    struct {
        enum comm_backend_choice backend; // auto | ring | mpi | nccl
        double timeout_s;          // bound on every collective wait, seconds
        uint64_t slice_bytes;      // ring pipelining granularity, bytes
    } comm;
    struct {
        enum model_kind type;      // the model trained (worker/model.h's registry)
        struct config_int_list hidden; // hidden layer widths
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
        long seed;
        long log_every;            // steps between progress lines
        int deterministic;
        long micro_batches;        // deterministic mode: micro-batches per global batch
        long check_replicas_every; // steps between replica hash checks; 0 = off
        int shard_optimizer;       // optimizer step sharded into the all-reduce (normal mode)
    } train;
    struct {
        enum dataset_kind dataset; // fashion-mnist | mnist-idx | synthetic
        char path[CONFIG_STR_MAX]; // directory with the four IDX files
        uint64_t max_bytes;        // bound on the pixels + labels the IDX headers claim, bytes; 0 = none
        int standardize;
        int fallback_synthetic;    // use synthetic data if the dataset is missing
        long train_limit;          // use only the first N training samples; 0 = all
        long synthetic_train;      // synthetic set sizes
        long synthetic_test;
        long synthetic_features;   // synthetic sample width
    } data;
    struct {
        char dir[CONFIG_STR_MAX];  // "" = no checkpoints
        long every_steps;          // 0 = only at the end
        long keep_last;            // newest checkpoints kept (default 3); 0 = all
    } checkpoint;
    struct {
        long steps;                // --verify: steps to replay
        double rtol;               // --verify: relative tolerance (non-deterministic mode)
    } verify;
};

// Fills *cfg with the defaults from the schema.
void config_defaults(struct config *cfg);

// Parses an INI file into *cfg (on top of what it holds). On error returns
// VGPU_ECONFIG (or -errno when the file cannot be read) and writes
// "file:line: message" into err.
int config_load_file(struct config *cfg, const char *path, char *err, size_t err_bytes);

// Parses INI text (as config_load_file does) with `origin` naming it in errors.
int config_load_string(struct config *cfg, const char *text, const char *origin, char *err,
                       size_t err_bytes);

// Applies one "section.key=value" override (from --set). Errors as above,
// with "--set section.key" as the location.
int config_apply_override(struct config *cfg, const char *assignment, char *err, size_t err_bytes);

// Applies the launcher's environment variables (what vgpurun exports):
// VGPU_RANKS_PER_DEVICE -> devices.ranks_per_device, VGPU_MEMORY_LIMIT ->
// devices.memory_limit, VGPU_BACKEND -> comm.backend. Precedence: file <
// environment < --set. Errors name the variable: "VGPU_MEMORY_LIMIT=12Q ...".
int config_apply_env(struct config *cfg, char *err, size_t err_bytes);
// Writes one entry per variable config_apply_env reads, as env_print_reference does.
void config_print_env_reference(FILE *f);
// Which of those variables are set, for the job's log: "VGPU_MEMORY_LIMIT=48M
// (devices.memory_limit), ..." into buf; "" when none is.
void config_describe_env(char *buf, size_t bytes);

// data.path's default: the Debian package's directory. Only there does a
// missing dataset fall back to the synthetic one (data.fallback_synthetic).
#define CONFIG_DEFAULT_DATA_PATH "/usr/share/datasets/fashion-mnist"

// Checks cross-key rules (conflicts, list lengths). Errors as above.
int config_validate(const struct config *cfg, char *err, size_t err_bytes);

// The job's configuration, the whole way: the defaults, then the file at
// path (NULL: none), the VGPU_* environment, the overrides in order, then the
// cross-key rules (whose message names where the values came from: "a.ini
// with --set: ..."). Returns 0, or VGPU_ECONFIG (-errno for a file that
// cannot be read) with the message in err.
int config_load_job(struct config *cfg, const char *path, const char *const *overrides,
                    int n_overrides, char *err, size_t err_bytes);
// The same from the file's text, read once (config_read_file; NULL: no
// file), with path naming it in messages. program_sections: a section vgpu
// does not know, and an override of one of its keys, is the program's own
// (libvgpu's way: a program may keep its settings in the job's file) and is
// skipped; 0 refuses them (vgpu_train's way: the file is all vgpu's).
int config_load_job_text(struct config *cfg, const char *text, const char *path,
                         const char *const *overrides, int n_overrides, int program_sections,
                         char *err, size_t err_bytes);
// Reads a config file whole (a regular text file of at most 16 MiB) into
// *text (malloc'd, NUL-terminated). Returns 0, or VGPU_ECONFIG (-errno for a
// file that cannot be opened) with the message in err.
int config_read_file(const char *path, char **text, char *err, size_t err_bytes);

// The config-file text of an enum key's value, e.g. config_enum_name("train",
// "optimizer", OPTIM_ADAM) = "adam". NULL for a key that is not an enum or a
// value out of range.
const char *config_enum_name(const char *section, const char *key, int value);

// Parses a byte size such as "512", "64K", "512M", "2G", "1.5G" (binary units;
// a fraction of a unit is rounded down to whole bytes, "6.4M" = 6710886).
// Returns 0 and sets *bytes, or VGPU_EINVAL.
int config_parse_size(const char *text, uint64_t *bytes);

// Writes every key with its default and documentation, INI-formatted.
void config_print_reference(void *file);

#endif
