// vgpu_device_probe.c: the device facts vgpu-project's lanes need, measured
// on the device in hand (docs/PROJECTION.md, "The lanes"): what an
// operation costs the host beyond its arithmetic (a 1-element operation's
// call), the shortest operation, a wait for an idle device, and the copy
// rates. scripts/project_calibrate.sh writes them into this machine's
// target file. Nothing here is fitted to a step time.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_internal.h"
#include "math_ops.h"
#include "util.h"

#define CALLS 2000 // a tiny operation's calls a round
#define ROUNDS 7   // the median round counts

static int by_value_(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median_(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value_);
    return v[n / 2];
}

// Microseconds a call of `what` takes (the median round's mean): 0 scale,
// 1 a wait for the idle device, 2 a scale then a wait (the op's whole time).
static double time_us_(device_t *dev, float *x, int what)
{
    double rounds[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        const double t0 = util_now_s();
        for (int i = 0; i < CALLS; i++) {
            if (what != 1 && math_scale(dev, x, 1.0f, 1) < 0)
                return -1;
            if (what != 0 && device_sync(dev) < 0)
                return -1;
        }
        if (what == 0 && device_sync(dev) < 0)
            return -1;
        rounds[r] = (util_now_s() - t0) / CALLS * 1e6;
    }
    return median_(rounds, ROUNDS);
}

// GB/s of a copy of `bytes` (best of 5): host to device, or inside the device.
static double copy_gbyte_per_s_(device_t *dev, void *d0, void *d1, void *host, size_t bytes,
                                int h2d)
{
    double best = 0;
    for (int i = 0; i < 5; i++) {
        const double t0 = util_now_s();
        const int rc = h2d ? device_copy_to_device(dev, d0, host, bytes)
                           : device_copy(dev, d1, d0, bytes);
        if (rc < 0 || device_sync(dev) < 0)
            return 0;
        const double s = util_now_s() - t0;
        if (s > 0 && (double)bytes / s / 1e9 > best)
            best = (double)bytes / s / 1e9;
    }
    return best;
}

int main(int argc, char **argv)
{
    enum device_kind kind = DEVICE_KIND_CPU;
    static const struct option longs[] = {{"help", no_argument, NULL, 'h'},
                                          {"kind", required_argument, NULL, 'k'}, {0}};
    int c;
    while ((c = getopt_long(argc, argv, "k:h", longs, NULL)) != -1) {
        if (c == 'k' && !strcmp(optarg, "cuda"))
            kind = DEVICE_KIND_CUDA;
        else if (!(c == 'k' && !strcmp(optarg, "cpu"))) {
            fprintf(c == 'h' ? stdout : stderr,
                    "usage: vgpu_device_probe [-k|--kind cpu|cuda]\n"
                    "Measures the device's lanes facts (a launch, the shortest operation, a wait,\n"
                    "the copy rates) and prints them as target-file keys (INI); "
                    "scripts/project_calibrate.sh\nwrites them into this machine's target "
                    "(docs/PROJECTION.md).\n");
            return c == 'h' ? 0 : 2;
        }
    }
    const size_t bytes = (size_t)64 << 20;
    struct device_info info;
    device_t dev;
    int count = 0;
    if (device_discover(kind, &info, 1, &count, NULL, 0) < 0 || count < 1 ||
        device_open(&dev, &info, 0, "local", 2 * bytes + (1 << 20), 1) < 0) {
        fprintf(stderr, "vgpu_device_probe: cannot open a %s device\n", device_kind_name(kind));
        return 1;
    }
    void *d0 = NULL, *d1 = NULL, *host = malloc(bytes);
    float *x = NULL;
    if (!host || device_alloc(&dev, bytes, &d0) < 0 || device_alloc(&dev, bytes, &d1) < 0 ||
        device_alloc_floats(&dev, 1, &x) < 0 || device_zero(&dev, x, sizeof *x) < 0) {
        fprintf(stderr, "vgpu_device_probe: out of memory\n");
        return 1;
    }
    memset(host, 1, bytes);
    time_us_(&dev, x, 2); // warm up
    const double launch = time_us_(&dev, x, 0), sync = time_us_(&dev, x, 1);
    const double whole = time_us_(&dev, x, 2);
    const int synchronous = !(device_caps(&dev) & DEVICE_CAP_GPU);
    // A GPU's call returns once queued: the op's own time is what a call
    // and a wait take beyond the call and an idle wait. On a synchronous
    // device the call is the op.
    const double beyond = whole - launch - sync;
    const double kernel_min = synchronous ? launch : beyond > 0 ? beyond : 0;
    const double h2d = copy_gbyte_per_s_(&dev, d0, d1, host, bytes, 1);
    const double d2d = copy_gbyte_per_s_(&dev, d0, d1, host, bytes, 0);
    printf("; vgpu_device_probe -k %s: %s\n", device_kind_name(kind), info.name);
    printf("; a 1-element math_scale's call (median of %d rounds of %d)\nlaunch_us = %.3f\n",
           ROUNDS, CALLS, launch);
    printf("; the shortest operation (%s)\nkernel_min_us = %.3f\n",
           synchronous ? "a synchronous device: the same call" : "a call and a wait, less each alone",
           kernel_min);
    printf("; a wait for the idle device\nsync_us = %.3f\n", sync);
    printf("; a 64 MiB host-to-device copy (device-to-device: %.1f GB/s, read and write not "
           "counted twice)\nhost_link_gbyte_per_s = %.1f\n", d2d, h2d);
    printf("synchronous = %s\n", synchronous ? "true" : "false");
    device_free(&dev, x);
    device_free(&dev, d1);
    device_free(&dev, d0);
    device_close(&dev);
    free(host);
    return 0;
}
