// gpu_sim.c: the simulated GPU driver (gpu_driver.h): a described topology
// stands in for CUDA's answers, so the runtime's GPU decisions run in tests.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "env.h"
#include "gpu_driver.h"
#include "log.h"
#include "status.h"
#include "util.h"

// Fixed UUIDs, the same for every rank of a host: the index says which GPU.
static void sim_uuid_(char *buf, size_t bytes, int gpu, int instance)
{
    if (instance < 0)
        snprintf(buf, bytes, "GPU-5117a000-0000-4000-8000-%012x", gpu);
    else
        snprintf(buf, bytes, "MIG-5117a000-0000-4000-8000-%06x%06x", gpu, instance);
}

static int sim_mps_active_(void)
{
    const char *pipe = getenv("CUDA_MPS_PIPE_DIRECTORY");
    return pipe && *pipe;
}

// One group "[COUNTx]SIZE[/OPTION]...": appends its devices to gpus.
static int parse_group_(char *group, struct gpu_sim_gpu *gpus, int max, int *count, char *err,
                        size_t err_bytes)
{
    char *save = NULL;
    char *head = strtok_r(group, "/", &save);
    if (!head)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "VGPU_SIM_GPUS: an empty group");
    long n = 1;
    char *x = strchr(head, 'x');
    if (x) {
        char *end;
        n = strtol(head, &end, 10);
        if (end != x || n < 1 || n > GPU_MAX)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "VGPU_SIM_GPUS: '%s': expected COUNTxSIZE with COUNT 1..%d", head,
                               GPU_MAX);
        head = x + 1;
    }
    uint64_t size = 0;
    if (config_parse_size(head, &size) < 0 || size < (1u << 20))
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "VGPU_SIM_GPUS: '%s' is not a memory size of at least 1M (e.g. 80G)%s",
                           head, strchr(head, 'X') ? "; a count takes a lower-case x: 8x80G" : "");
    int mode = GPU_MODE_DEFAULT, mig = 0, failing = -1;
    uint64_t used = 0;
    char name[96] = "";
    for (char *opt; (opt = strtok_r(NULL, "/", &save));) {
        if (!strcmp(opt, "exclusive"))
            mode = GPU_MODE_EXCLUSIVE_PROCESS;
        else if (!strcmp(opt, "prohibited"))
            mode = GPU_MODE_PROHIBITED;
        else if (!strncmp(opt, "used=", 5) && config_parse_size(opt + 5, &used) == 0 && used <= size)
            ;
        else if (!strncmp(opt, "mig=", 4) && (mig = atoi(opt + 4)) >= 1 && mig <= 7)
            ;
        else if (!strncmp(opt, "failing=", 8) && (failing = atoi(opt + 8)) >= 0 && failing < n)
            ;
        else if (!strncmp(opt, "name=", 5) && opt[5])
            snprintf(name, sizeof name, "%s", opt + 5);
        else
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "VGPU_SIM_GPUS: unknown or bad option '%s' (exclusive, prohibited, "
                               "used=SIZE <= the size, mig=1..7, failing=I < the count, name=NAME)",
                               opt);
    }
    char gib[32];
    util_format_bytes(size, gib, sizeof gib);
    for (long g = 0; g < n; g++) {
        const int instances = mig ? mig : 1;
        for (int k = 0; k < instances; k++) {
            if (*count == max)
                return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                   "VGPU_SIM_GPUS: more than %d devices", max);
            const int physical = *count; // index of this device on the host
            struct gpu_sim_gpu *d = &gpus[(*count)++];
            memset(d, 0, sizeof *d);
            struct gpu_props *p = &d->props;
            p->ordinal = physical;
            p->compute_mode = mode;
            p->mig = mig > 0;
            p->total_bytes = size / (uint64_t)instances;
            p->free_bytes = (size - used) / (uint64_t)instances;
            if (name[0])
                snprintf(p->name, sizeof p->name, "%s", name);
            else if (mig)
                snprintf(p->name, sizeof p->name, "Simulated GPU %s MIG %d/%d", gib, k + 1, mig);
            else
                snprintf(p->name, sizeof p->name, "Simulated GPU %s", gib);
            const int parent = physical - (mig ? k : 0); // the GPU a MIG instance is of
            sim_uuid_(p->uuid, sizeof p->uuid, parent, mig ? k : -1);
            snprintf(p->pci_bus_id, sizeof p->pci_bus_id, "00000000:%02X:00.0",
                     0x10 + (unsigned)parent);
            d->failing = failing == g;
        }
    }
    return 0;
}

// "driver=MAJOR.MINOR" -> MAJOR * 1000 + MINOR * 10, as cudaDriverGetVersion.
static int parse_driver_(const char *v, int *version, char *err, size_t err_bytes)
{
    char *end;
    long major = strtol(v, &end, 10), minor = 0;
    if (end != v && *end == '.') {
        const char *m = end + 1;
        minor = strtol(m, &end, 10);
        if (end == m)
            minor = -1;
    }
    if (end == v || *end || major < 1 || major > 99 || minor < 0 || minor > 9)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "VGPU_SIM_GPUS: 'driver=%s': expected the driver's CUDA version, "
                           "e.g. driver=12.8",
                           v);
    *version = (int)(major * 1000 + minor * 10);
    return 0;
}

int gpu_sim_parse(const char *spec, struct gpu_sim_gpu *gpus, int max, int *count,
                  struct gpu_sim_host *host, char *err, size_t err_bytes)
{
    *count = 0;
    memset(host, 0, sizeof *host);
    if (!strcmp(spec, "nodriver")) {
        host->no_driver = 1;
        return 0;
    }
    if (!strcmp(spec, "none"))
        return 0;
    char copy[512];
    if (strlen(spec) >= sizeof copy)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "VGPU_SIM_GPUS: longer than %zu characters",
                           sizeof copy - 1);
    snprintf(copy, sizeof copy, "%s", spec);
    char *save = NULL;
    int groups = 0, drivers = 0; // "driver=12.8" alone: a driver, no GPU
    for (char *group = strtok_r(copy, ",", &save); group; group = strtok_r(NULL, ",", &save)) {
        // The messages say everything (the value, what was expected): no
        // trace lines on top of them.
        int rc = 0;
        if (!strncmp(group, "driver=", 7)) {
            rc = parse_driver_(group + 7, &host->driver_version, err, err_bytes);
            drivers++;
        } else {
            rc = parse_group_(group, gpus, max, count, err, err_bytes);
            groups++;
        }
        if (rc < 0)
            return rc;
    }
    if (*count == 0 && !(drivers && !groups))
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "VGPU_SIM_GPUS: no device in '%s' (say 'none' for a driver without GPUs)",
                           spec);
    return 0;
}

// CUDA's own enumeration with no CUDA_VISIBLE_DEVICES: every GPU, and of
// the MIG instances only the first (one a process). Fills order[]; returns
// how many.
static int default_order_(const struct gpu_sim_gpu *gpus, int count, int *order, int max)
{
    int n = 0, mig_seen = 0;
    for (int k = 0; k < count && n < max; k++) {
        if (gpus[k].props.mig && mig_seen++)
            continue;
        order[n++] = k;
    }
    return n;
}

// The device an entry of CUDA_VISIBLE_DEVICES names: an ordinal of CUDA's
// default enumeration, or a prefix of a UUID ("GPU-5117a", "MIG-..."); -1
// for none.
static int match_entry_(const struct gpu_sim_gpu *gpus, int count, const char *entry)
{
    char *end;
    long i = strtol(entry, &end, 10);
    if (end != entry && !*end) {
        int dflt[GPU_MAX];
        const int n = default_order_(gpus, count, dflt, GPU_MAX);
        return i >= 0 && i < n ? dflt[i] : -1;
    }
    size_t len = strlen(entry);
    int found = -1;
    for (int k = 0; k < count && len >= 4; k++)
        if (!strncmp(gpus[k].props.uuid, entry, len)) {
            if (found >= 0)
                return -1; // ambiguous: CUDA refuses it too
            found = k;
        }
    return found;
}

int gpu_sim_visible(const struct gpu_sim_gpu *gpus, int count, const char *visible, int *order,
                    int max)
{
    if (!visible)
        return default_order_(gpus, count, order, max);
    int n = 0, mig_seen = 0;
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", visible);
    char *save = NULL;
    for (char *e = strtok_r(copy, ",", &save); e && n < max; e = strtok_r(NULL, ",", &save)) {
        while (*e == ' ')
            e++;
        int k = match_entry_(gpus, count, e);
        if (k < 0)
            break; // CUDA enumerates up to the first entry that names nothing
        int dup = 0;
        for (int j = 0; j < n; j++)
            dup |= order[j] == k;
        if (dup)
            break;
        if (gpus[k].props.mig && mig_seen++)
            continue; // one MIG instance a process: the first listed
        order[n++] = k;
    }
    return n;
}

uint64_t gpu_mps_client_limit(const char *value, int ordinal)
{
    if (!value)
        return 0;
    char copy[512];
    snprintf(copy, sizeof copy, "%s", value);
    char *save = NULL;
    for (char *e = strtok_r(copy, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(e, '=');
        if (!eq || atoi(e) != ordinal)
            continue;
        char size[64];
        snprintf(size, sizeof size, "%s", eq + 1);
        size_t len = strlen(size); // MPS writes "1024MB": the parser takes "1024M"
        if (len > 2 && (size[len - 1] == 'B' || size[len - 1] == 'b') &&
            strchr("KkMmGgTt", size[len - 2]))
            size[len - 1] = '\0';
        uint64_t bytes = 0;
        return config_parse_size(size, &bytes) == 0 ? bytes : 0;
    }
    return 0;
}

static int sim_scan_(struct gpu_props *out, int max, int *count, char *err, size_t err_bytes)
{
    *count = 0;
    static struct gpu_sim_gpu gpus[GPU_MAX];
    int n = 0;
    struct gpu_sim_host host;
    const char *spec = env_read("VGPU_SIM_GPUS");
    const int parsed = gpu_sim_parse(spec ? spec : "none", gpus, GPU_MAX, &n, &host, err, err_bytes);
    if (parsed < 0)
        return parsed;
    if (host.no_driver)
        return 0;
    // As CUDA: an old driver makes cudaGetDeviceCount fail before any GPU.
    const int runtime = gpu_runtime_version();
    if (host.driver_version && host.driver_version / 1000 < runtime / 1000)
        return gpu_driver_check_version(host.driver_version, runtime, err, err_bytes);
    int order[GPU_MAX];
    const int visible = gpu_sim_visible(gpus, n, getenv("CUDA_VISIBLE_DEVICES"), order, GPU_MAX);
    for (int i = 0; i < visible && i < max; i++) {
        const struct gpu_sim_gpu *g = &gpus[order[i]];
        if (g->failing)
            return util_errorf(err, err_bytes, VGPU_EIO,
                               "GPU %d (%s, %s) is present but failing: cudaGetDeviceProperties: "
                               "unspecified launch failure (simulated)",
                               i, g->props.uuid, g->props.pci_bus_id);
        out[i] = g->props;
        out[i].ordinal = i;
        out[i].mps = sim_mps_active_();
        if (out[i].mps)
            out[i].client_limit_bytes =
                gpu_mps_client_limit(getenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), i);
        (*count)++;
    }
    return 0;
}

const struct gpu_driver gpu_sim_driver = {
    .name = "simulated",
    .simulated = 1,
    .scan = sim_scan_,
    .mps_active = sim_mps_active_,
};

const struct gpu_driver *gpu_driver(void)
{
    const char *spec = env_read("VGPU_SIM_GPUS");
    if (spec && *spec)
        return &gpu_sim_driver;
    return gpu_cuda_driver();
}

int gpu_driver_check_version(int driver_version, int runtime_version, char *err,
                             size_t err_bytes)
{
    if (driver_version <= 0 || driver_version / 1000 >= runtime_version / 1000)
        return 0;
    // The Linux driver branch each CUDA major version needs at least.
    const int major = runtime_version / 1000;
    const char *branch = major >= 13 ? "R580" : major == 12 ? "R525" : major == 11 ? "R450" : "a newer";
    return util_errorf(err, err_bytes, VGPU_ENODEV,
                       "the NVIDIA driver supports CUDA %d.%d, older than the CUDA %d.%d runtime "
                       "this vgpu was built with (it needs driver %s or newer): update the driver, "
                       "build vgpu with a CUDA %d toolkit, or run on the CPU with devices.kind = cpu",
                       driver_version / 1000, driver_version % 1000 / 10, major,
                       runtime_version % 1000 / 10, branch, driver_version / 1000);
}
