// config_vgpu.c: libvgpu's part of the job configuration, [devices] and
// [comm]: its schema, the launcher variables that set it, its rules, and the
// engine's calls over it alone (config.h).
#include "config.h"

#include <stddef.h>
#include <stdio.h>

#include "status.h"
#include "util.h"

static const char *const device_kinds_[] = {CONFIG_DEVICE_KINDS(CONFIG_ENUM_TEXT) NULL};
static const char *const backends_[] = {CONFIG_BACKENDS(CONFIG_ENUM_TEXT) NULL};
// The engine stores an enum key's value through an int.
_Static_assert(sizeof(enum comm_backend_choice) == sizeof(int), "enum keys are stored as int");

#define F_(sec, field) offsetof(struct config, sec.field)

// The schema: one row per key. The reference printed by --help-config and the
// comments in configs/*.ini come from here.
static const struct config_key keys_[] = {
    {"devices", "kind", CONFIG_ENUM, F_(devices, kind), 0, "auto", 0, 0, device_kinds_,
     "device backend: cuda needs a GPU; auto falls back to CPU simulation"},
    {"devices", "ranks_per_device", CONFIG_INT, F_(devices, ranks_per_device), 0, "0", 0, 1024, NULL,
     "ranks sharing one physical device; 0 = ceil(local ranks / devices)"},
    {"devices", "memory_limit", CONFIG_SIZE, F_(devices, memory_limit), 0, "0", 0, 0, NULL,
     "memory cap per rank (virtual GPU), e.g. 512M or 2G; 0 = auto"},
    {"devices", "memory_fraction", CONFIG_FLOAT, F_(devices, memory_fraction), 0, "0", 0, 1, NULL,
     "share of each device's free memory split among its ranks; 0 = unset"},
    {"devices", "map", CONFIG_INT_LIST, F_(devices, map), 0, "", 0, 1023, NULL,
     "explicit device index for each local rank, e.g. 0,0,1,1; empty = policy"},
    {"devices", "cpu_threads", CONFIG_INT, F_(devices, cpu_threads), 0, "0", 0, 1024, NULL,
     "BLAS threads per rank; 0 = cores / the ranks on this machine (network-namespace hosts and "
     "containers of one machine share its cores), at least 1"},

    {"comm", "backend", CONFIG_ENUM, F_(comm, backend), 0, "auto", 0, 0, backends_,
     "collective backend; auto = nccl if every rank has its own GPU, else ring"},
    {"comm", "timeout_s", CONFIG_FLOAT, F_(comm, timeout_s), 0, "300", 0.1, 86400, NULL,
     "bound on every collective wait, seconds; a peer that does not arrive ends the job"},
    {"comm", "slice_bytes", CONFIG_SIZE, F_(comm, slice_bytes), 0, "1M", 0, 0, NULL,
     "ring all-reduce pipelining slice per rank, bytes"},
};

// Launchers (vgpurun) pass device settings to every rank on every host as
// environment variables; they override the file and yield to --set.
static const struct config_env_key env_keys_[] = {
    {"VGPU_RANKS_PER_DEVICE", "devices", "ranks_per_device"},
    {"VGPU_MEMORY_LIMIT", "devices", "memory_limit"},
    {"VGPU_BACKEND", "comm", "backend"},
    {"VGPU_COMM_TIMEOUT_S", "comm", "timeout_s"},
};

static int validate_(const void *part, char *err, size_t err_bytes)
{
    const struct config *cfg = part;
    if (cfg->devices.memory_limit && cfg->devices.memory_fraction > 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "devices.memory_limit and devices.memory_fraction conflict: set one of them");
    if (cfg->devices.map.count && cfg->devices.ranks_per_device)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "devices.map and devices.ranks_per_device conflict: set one of them");
    return 0;
}

const struct config_schema config_vgpu_schema = {
    .keys = keys_,
    .nkeys = sizeof keys_ / sizeof keys_[0],
    .env = env_keys_,
    .nenv = sizeof env_keys_ / sizeof env_keys_[0],
    .bytes = sizeof(struct config),
    .validate = validate_,
};

#define PART_(cfg) (const struct config_part[]){{&config_vgpu_schema, (void *)(cfg)}}

void config_defaults(struct config *cfg) { config_parts_defaults(PART_(cfg), 1); }

int config_apply_env(struct config *cfg, char *err, size_t err_bytes)
{
    return config_parts_env(PART_(cfg), 1, err, err_bytes);
}

void config_print_env_reference(FILE *f) { config_parts_print_env_reference(PART_(NULL), 1, f); }

void config_describe_env(char *buf, size_t bytes)
{
    config_parts_describe_env(PART_(NULL), 1, buf, bytes);
}

int config_validate(const struct config *cfg, char *err, size_t err_bytes)
{
    return validate_(cfg, err, err_bytes);
}

int config_load_job_text(struct config *cfg, const char *text, const char *path,
                         const char *const *overrides, int n_overrides, int program_sections,
                         char *err, size_t err_bytes)
{
    return config_parts_load_job(PART_(cfg), 1, text, path, overrides, n_overrides,
                                 program_sections, err, err_bytes);
}

const char *config_enum_name(const char *section, const char *key, int value)
{
    return config_schema_enum_name(&config_vgpu_schema, section, key, value);
}
