// target.h: a described cluster that vgpu-project projects a job onto (a
// target file, configs/targets/*.ini): its hosts, GPUs, the device's peak
// rates, the links inside a host and between hosts, the collective's
// algorithm. Read through the configuration engine (common/config.h), so
// every key is typed, bounded, documented and settable with --set.
#ifndef VGPU_TARGET_H
#define VGPU_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"

#define TARGET_ALGOS(X) \
    X(TARGET_RING, "ring") X(TARGET_HIERARCHICAL, "hierarchical") X(TARGET_TREE, "tree")
#define TARGET_MATHS(X) X(TARGET_FP32, "fp32") X(TARGET_TF32, "tf32") X(TARGET_BF16, "bf16")
enum target_algo { TARGET_ALGOS(CONFIG_ENUM_CONSTANT) };
enum target_math { TARGET_MATHS(CONFIG_ENUM_CONSTANT) };

// A link: its per-message latency (alpha) and rate one way (1/beta).
struct target_link {
    char name[64];       // what it is, for the report ("NVLink 4", "100GbE")
    double latency_us;   // alpha: one step's fixed cost, microseconds
    double gbit_per_s;   // one direction, one GPU's share (intra) or one NIC (inter), Gbit/s
    long nics_per_host;  // inter only: NICs a host drives at once
    double payload_share; // inter only: the share of the rate a collective's bytes get (headers)
    uint64_t burst_bytes; // inter only: a shaper's bucket, bytes a NIC sends at once after idling
    int calibrated;      // intra only: latency and rate from the --measured-on file
};

struct target {
    struct {
        char name[128];
        long hosts;
        long gpus_per_host;
        enum target_algo collective;
    } cluster;
    struct {
        char name[64];
        int measured;            // the device the trace was measured on: compute as measured
        double tflops[3];        // dense peak a GPU, by enum target_math; 0 = not given
        uint64_t memory_bytes;   // device memory a GPU
        double memory_gbyte_per_s; // its bandwidth, GB/s (1e9 bytes)
        // The lanes (docs/PROJECTION.md): what an operation costs beyond its work.
        double launch_us;        // the host's time to launch one operation; 0 = lanes off
        double kernel_min_us;    // the shortest time an operation takes on the device
        double sync_us;          // the host's cost of one wait for the device, beyond the wait
        double host_link_gbyte_per_s; // host <-> device copies, GB/s; 0 = memory_gbyte_per_s
        int synchronous;         // each call returns when its work is done (a CPU device)
    } device;
    struct target_link intra, inter;
};

extern const struct config_schema target_schema;

// Reads a target file with --set style overrides ("intra.latency_us=2")
// and checks it. Returns 0, or VGPU_ECONFIG / -errno with "path:line:
// message" or the rule broken in err.
int target_load(struct target *t, const char *path, const char *const *overrides, int n_overrides,
                char *err, size_t err_bytes);
// The same from text (origin names it in errors).
int target_load_text(struct target *t, const char *text, const char *origin,
                     const char *const *overrides, int n_overrides, char *err, size_t err_bytes);

// GPUs in all.
long target_gpus(const struct target *t);
// Peak FLOP/s of one GPU for `math` (0 when the file gives none).
double target_peak_flops(const struct target *t, enum target_math math);
// Rate of a link, bytes a second one way (inter: the whole host's NICs, the
// payload's share of it).
double target_link_bytes_per_s(const struct target_link *l, int inter);
const char *target_algo_name(enum target_algo a);
const char *target_math_name(enum target_math m);
// "fp32" -> TARGET_FP32; -1 for a name not known.
int target_math_parse(const char *name);

// Every key, its default and documentation, as INI (vgpu-project --help-target).
void target_print_reference(FILE *f);

#endif
