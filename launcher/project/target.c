// target.c: the target file's schema, its rules and its loading (target.h).
#include "target.h"

#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "util.h"

static const char *const algos_[] = {TARGET_ALGOS(CONFIG_ENUM_TEXT) NULL};
static const char *const maths_[] = {TARGET_MATHS(CONFIG_ENUM_TEXT) NULL};
_Static_assert(sizeof(enum target_algo) == sizeof(int), "enum keys are stored as int");

#define F_(field) offsetof(struct target, field)
#define STR_(field) sizeof(((struct target *)0)->field)

// The schema: docs/PROJECTION.md's table of keys and --help-target come
// from here. A rate or peak of 0 means "not given"; the rules below say
// when one is needed.
static const struct config_key keys_[] = {
    {"target", "name", CONFIG_STR, F_(cluster.name), STR_(cluster.name), "", 0, 0, NULL,
     "what the cluster is, for the report"},
    {"target", "hosts", CONFIG_INT, F_(cluster.hosts), 0, "1", 1, 4096, NULL,
     "hosts (nodes)"},
    {"target", "gpus_per_host", CONFIG_INT, F_(cluster.gpus_per_host), 0, "1", 1, 64, NULL,
     "GPUs a host, one rank each"},
    {"target", "collective", CONFIG_ENUM, F_(cluster.collective), 0, "ring", 0, 0, algos_,
     "all-reduce algorithm: ring (one ring over every GPU), hierarchical (ring inside each "
     "host, then across hosts), tree (a double binary tree, as NCCL's)"},

    {"device", "name", CONFIG_STR, F_(device.name), STR_(device.name), "", 0, 0, NULL,
     "the GPU, for the report"},
    {"device", "measured", CONFIG_BOOL, F_(device.measured), 0, "false", 0, 0, NULL,
     "the device the trace was measured on (a target of this machine): compute is taken "
     "as measured, no peak needed"},
    {"device", "fp32_tflops", CONFIG_FLOAT, F_(device.tflops[TARGET_FP32]), 0, "0", 0, 1e6, NULL,
     "dense FP32 peak a GPU, TFLOP/s (the datasheet's); 0 = not given"},
    {"device", "tf32_tflops", CONFIG_FLOAT, F_(device.tflops[TARGET_TF32]), 0, "0", 0, 1e6, NULL,
     "dense TF32 tensor peak a GPU, TFLOP/s (without sparsity); 0 = not given"},
    {"device", "bf16_tflops", CONFIG_FLOAT, F_(device.tflops[TARGET_BF16]), 0, "0", 0, 1e6, NULL,
     "dense BF16 tensor peak a GPU, TFLOP/s (without sparsity); 0 = not given"},
    {"device", "memory", CONFIG_SIZE, F_(device.memory_bytes), 0, "0", 0, 0, NULL,
     "device memory a GPU, e.g. 80G; 0 = not given (no fit check)"},
    {"device", "memory_gbyte_per_s", CONFIG_FLOAT, F_(device.memory_gbyte_per_s), 0, "0", 0, 1e6,
     NULL, "device memory bandwidth, GB/s (1e9 bytes); 0 = not given (work without FLOPs is "
     "then taken as measured)"},
    {"device", "launch_us", CONFIG_FLOAT, F_(device.launch_us), 0, "0", 0, 1e6, NULL,
     "the host's time to launch one operation (a kernel, a copy), microseconds; 0 = not given "
     "(no lanes: compute is scaled by the peaks alone)"},
    {"device", "kernel_min_us", CONFIG_FLOAT, F_(device.kernel_min_us), 0, "0", 0, 1e6, NULL,
     "the shortest time an operation takes on the device, microseconds (an empty kernel's)"},
    {"device", "sync_us", CONFIG_FLOAT, F_(device.sync_us), 0, "0", 0, 1e6, NULL,
     "the host's cost of one wait for the device beyond the wait itself, microseconds"},
    {"device", "host_link_gbyte_per_s", CONFIG_FLOAT, F_(device.host_link_gbyte_per_s), 0, "0",
     0, 1e6, NULL, "copies between the host and the device, GB/s one way (PCIe); 0 = "
     "memory_gbyte_per_s"},
    {"device", "synchronous", CONFIG_BOOL, F_(device.synchronous), 0, "false", 0, 0, NULL,
     "each operation returns when its work is done (a CPU device): the host and device lanes "
     "add up instead of overlapping"},

    {"intra", "link", CONFIG_STR, F_(intra.name), STR_(intra.name), "", 0, 0, NULL,
     "the link between GPUs of one host (NVLink 4, PCIe 4.0 x16, shared memory), for the "
     "report"},
    {"intra", "latency_us", CONFIG_FLOAT, F_(intra.latency_us), 0, "0", 0, 1e6, NULL,
     "alpha: the fixed cost of one step of a collective inside a host, microseconds"},
    {"intra", "gbit_per_s", CONFIG_FLOAT, F_(intra.gbit_per_s), 0, "0", 0, 1e6, NULL,
     "one GPU's rate to its peers inside a host, one direction, Gbit/s; needed with "
     "gpus_per_host > 1"},
    {"intra", "calibrated", CONFIG_BOOL, F_(intra.calibrated), 0, "false", 0, 0, NULL,
     "take latency_us and gbit_per_s from the [intra] of the file given with --measured-on "
     "(scripts/project_calibrate.sh writes it)"},

    {"inter", "link", CONFIG_STR, F_(inter.name), STR_(inter.name), "", 0, 0, NULL,
     "the network between hosts (InfiniBand NDR, 100GbE), for the report"},
    {"inter", "latency_us", CONFIG_FLOAT, F_(inter.latency_us), 0, "0", 0, 1e7, NULL,
     "alpha: the fixed cost of one step of a collective across hosts, microseconds"},
    {"inter", "gbit_per_s", CONFIG_FLOAT, F_(inter.gbit_per_s), 0, "0", 0, 1e6, NULL,
     "one NIC's rate, one direction, Gbit/s; needed with hosts > 1"},
    {"inter", "nics_per_host", CONFIG_INT, F_(inter.nics_per_host), 0, "1", 1, 64, NULL,
     "NICs a host drives at once (rail-optimised clusters: one a GPU)"},
    {"inter", "payload_share", CONFIG_FLOAT, F_(inter.payload_share), 0, "1", 0.01, 1, NULL,
     "the share of gbit_per_s that carries a collective's bytes, the rest being headers: TCP "
     "over Ethernet at MTU 1500 0.956 (1448 bytes of payload in a 1514-byte frame); 1 = the "
     "rate is the payload's"},
    {"inter", "burst_bytes", CONFIG_SIZE, F_(inter.burst_bytes), 0, "0", 0, 0, NULL,
     "a token-bucket shaper's bucket on each NIC (tc tbf, a cloud VM's rate limit): what it "
     "sends at once after idling, which hides up to burst / rate of a step's communication "
     "behind its compute; 0 = none (a NIC sends at its rate)"},
};

static int validate_(const void *part, char *err, size_t err_bytes)
{
    const struct target *t = part;
    if (!t->device.measured && t->device.tflops[TARGET_FP32] <= 0 &&
        t->device.tflops[TARGET_TF32] <= 0 && t->device.tflops[TARGET_BF16] <= 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "device: no peak given: set device.fp32_tflops (or tf32_tflops, "
                           "bf16_tflops), or device.measured = true for this machine");
    if (t->cluster.gpus_per_host > 1 && !t->intra.calibrated && t->intra.gbit_per_s <= 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "intra.gbit_per_s is missing: %ld GPUs a host need the link between "
                           "them (or intra.calibrated = true)", t->cluster.gpus_per_host);
    if (t->cluster.hosts > 1 && t->inter.gbit_per_s <= 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "inter.gbit_per_s is missing: %ld hosts need the network between them",
                           t->cluster.hosts);
    if (t->cluster.hosts * t->cluster.gpus_per_host > 65536)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "%ld hosts x %ld GPUs: at most 65536 GPUs",
                           t->cluster.hosts, t->cluster.gpus_per_host);
    return 0;
}

const struct config_schema target_schema = {
    .keys = keys_,
    .nkeys = sizeof keys_ / sizeof keys_[0],
    .bytes = sizeof(struct target),
    .validate = validate_,
};

#define PART_(t) (const struct config_part[]){{&target_schema, (void *)(t)}}

int target_load_text(struct target *t, const char *text, const char *origin,
                     const char *const *overrides, int n_overrides, char *err, size_t err_bytes)
{
    return config_parts_load_job(PART_(t), 1, text, origin, overrides, n_overrides, 0, err,
                                 err_bytes);
}

int target_load(struct target *t, const char *path, const char *const *overrides, int n_overrides,
                char *err, size_t err_bytes)
{
    char *text = NULL;
    int rc = config_read_file(path, &text, err, err_bytes);
    if (rc < 0)
        return rc;
    rc = target_load_text(t, text, path, overrides, n_overrides, err, err_bytes);
    free(text);
    return rc;
}

long target_gpus(const struct target *t) { return t->cluster.hosts * t->cluster.gpus_per_host; }

double target_peak_flops(const struct target *t, enum target_math math)
{
    return (unsigned)math < 3 ? t->device.tflops[math] * 1e12 : 0;
}

double target_link_bytes_per_s(const struct target_link *l, int inter)
{
    return l->gbit_per_s * 1e9 / 8 * (inter ? (double)l->nics_per_host * l->payload_share : 1.0);
}

const char *target_algo_name(enum target_algo a)
{
    return config_schema_enum_name(&target_schema, "target", "collective", (int)a);
}

const char *target_math_name(enum target_math m)
{
    return (unsigned)m < 3 ? maths_[m] : "?";
}

int target_math_parse(const char *name)
{
    for (int i = 0; maths_[i]; i++)
        if (strcmp(name, maths_[i]) == 0)
            return i;
    return -1;
}

void target_print_reference(FILE *f) { config_parts_print_reference(PART_(NULL), 1, f); }
