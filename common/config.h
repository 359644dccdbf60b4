// config.h: the job configuration: INI files plus --set overrides and the
// environment, checked against schema tables that also document every key.
//
// The engine reads a file for several parts at once: each part is a schema
// (its sections, keys, variables and rules across keys) and the struct it
// fills. libvgpu's part is [devices] and [comm] (struct config, below;
// config_vgpu.c); a program adds its own (vgpu_train: worker/train_config.h).
// libvgpu reads only its part and leaves the sections it does not know to
// the program (vgpu_config_text); a program that owns the whole file
// refuses them.
#ifndef VGPU_CONFIG_H
#define VGPU_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CONFIG_LIST_MAX 16
#define CONFIG_STR_MAX 256   // bytes of a string key's field, with its '\0'
#define CONFIG_VALUE_MAX 511 // characters of one value from --set or the environment
#define CONFIG_MAX_KEYS 256  // keys of all the parts read together

struct config_int_list {
    int count;
    long v[CONFIG_LIST_MAX];
};

struct config_float_list {
    int count;
    double v[CONFIG_LIST_MAX];
};

// ---- the engine ----

enum config_type {
    CONFIG_INT,        // long
    CONFIG_FLOAT,      // double
    CONFIG_BOOL,       // int
    CONFIG_SIZE,       // uint64_t bytes ("512M")
    CONFIG_STR,        // char[str_bytes]
    CONFIG_ENUM,       // an enum, stored as int
    CONFIG_INT_LIST,   // struct config_int_list
    CONFIG_FLOAT_LIST, // struct config_float_list
};

// One key of a schema: where it lives in the part's struct, its default
// (parsed like a user value), its bounds and its documentation.
struct config_key {
    const char *section;
    const char *key;
    enum config_type type;
    size_t offset;              // into the part's struct
    size_t str_bytes;           // CONFIG_STR: field size
    const char *def;
    double min, max;            // numeric range (ints, floats, list elements)
    const char *const *choices; // CONFIG_ENUM: the values' texts in enum order, NULL-terminated
    const char *doc;
};

// A variable that sets a key (what launchers export): file < environment < --set.
struct config_env_key {
    const char *var, *section, *key;
};

struct config_schema {
    const struct config_key *keys;
    size_t nkeys;
    const struct config_env_key *env;
    size_t nenv;
    size_t bytes; // the part's struct
    // Rules across keys: 0, or VGPU_ECONFIG with the message in err.
    int (*validate)(const void *cfg, char *err, size_t err_bytes);
};

// A schema and the struct it fills.
struct config_part {
    const struct config_schema *schema;
    void *cfg;
};

// Every part's struct set to its schema's defaults.
void config_parts_defaults(const struct config_part *parts, int n);
// INI text into the parts' structs (on top of what they hold), `origin`
// naming it in errors ("origin:line: message", VGPU_ECONFIG).
// program_sections: a section no part knows, and an override of one of its
// keys, is the program's own and is skipped; 0 refuses them.
int config_parts_load_text(const struct config_part *parts, int n, const char *text,
                           const char *origin, int program_sections, char *err, size_t err_bytes);
int config_parts_load_file(const struct config_part *parts, int n, const char *path, char *err,
                           size_t err_bytes);
// One "section.key=value" override (--set): errors located at "--set section.key".
int config_parts_override(const struct config_part *parts, int n, const char *assignment,
                          int program_sections, char *err, size_t err_bytes);
// The parts' variables that are set (errors name the variable).
int config_parts_env(const struct config_part *parts, int n, char *err, size_t err_bytes);
int config_parts_validate(const struct config_part *parts, int n, char *err, size_t err_bytes);
// The whole way: defaults, the text (NULL: none; path names it), the
// environment, the overrides in order, then the rules across keys (whose
// message names where the values came from: "a.ini with --set: ...").
int config_parts_load_job(const struct config_part *parts, int n, const char *text,
                          const char *path, const char *const *overrides, int n_overrides,
                          int program_sections, char *err, size_t err_bytes);
// Every key with its default and documentation, INI-formatted; every variable.
void config_parts_print_reference(const struct config_part *parts, int n, FILE *f);
void config_parts_print_env_reference(const struct config_part *parts, int n, FILE *f);
// Which of the parts' variables are set: "VGPU_MEMORY_LIMIT=48M
// (devices.memory_limit), ..." into buf; "" when none is.
void config_parts_describe_env(const struct config_part *parts, int n, char *buf, size_t bytes);
// The config-file text of an enum key's value; NULL for a key that is not an
// enum or a value out of range.
const char *config_schema_enum_name(const struct config_schema *schema, const char *section,
                                    const char *key, int value);

// Reads a config file whole (a regular text file of at most 16 MiB, without
// NUL bytes: util_read_file's) into *text (malloc'd, NUL-terminated).
// Returns 0, or VGPU_ECONFIG (-errno for a file that cannot be opened,
// VGPU_ENOMEM) with the message in err.
int config_read_file(const char *path, char **text, char *err, size_t err_bytes);

// Parses a byte size such as "512", "64K", "512M", "2G", "1.5G" (binary units;
// a fraction of a unit is rounded down to whole bytes, "6.4M" = 6710886).
// Returns 0 and sets *bytes, or VGPU_EINVAL.
int config_parse_size(const char *text, uint64_t *bytes);

// ---- libvgpu's part: [devices] and [comm] (config_vgpu.c) ----

// Keys with a fixed set of values are stored as enums. Each list gives the
// enum constant and the text a config file uses, in the enum's order.
#define CONFIG_DEVICE_KINDS(X) X(DEVICE_KIND_AUTO, "auto") X(DEVICE_KIND_CPU, "cpu") X(DEVICE_KIND_CUDA, "cuda")
#define CONFIG_BACKENDS(X) \
    X(BACKEND_AUTO, "auto") X(BACKEND_RING, "ring") X(BACKEND_MPI, "mpi") X(BACKEND_NCCL, "nccl")

#define CONFIG_ENUM_CONSTANT(name, text) name,
#define CONFIG_ENUM_TEXT(name, text) text,
enum device_kind { CONFIG_DEVICE_KINDS(CONFIG_ENUM_CONSTANT) };
enum comm_backend_choice { CONFIG_BACKENDS(CONFIG_ENUM_CONSTANT) };

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
};

extern const struct config_schema config_vgpu_schema;

// The engine over libvgpu's part alone (a file's other sections refused,
// unless program_sections says they are the program's).
void config_defaults(struct config *cfg);
// The launcher's variables (what vgpurun exports): VGPU_RANKS_PER_DEVICE ->
// devices.ranks_per_device, VGPU_MEMORY_LIMIT -> devices.memory_limit,
// VGPU_BACKEND -> comm.backend, VGPU_COMM_TIMEOUT_S -> comm.timeout_s.
// Errors name the variable: "VGPU_MEMORY_LIMIT=12Q ...".
int config_apply_env(struct config *cfg, char *err, size_t err_bytes);
void config_print_env_reference(FILE *f);
void config_describe_env(char *buf, size_t bytes);
int config_validate(const struct config *cfg, char *err, size_t err_bytes);
// As config_parts_load_job, over libvgpu's part alone.
int config_load_job_text(struct config *cfg, const char *text, const char *path,
                         const char *const *overrides, int n_overrides, int program_sections,
                         char *err, size_t err_bytes);
// e.g. config_enum_name("comm", "backend", BACKEND_RING) = "ring".
const char *config_enum_name(const char *section, const char *key, int value);

#endif
