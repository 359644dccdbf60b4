// test_runtime_cap.c: a multi-rank program for the cap test: every rank opens
// its virtual GPU; rank `victim` then asks for more than its cap, the others
// wait in a barrier. The job must end promptly with a message naming the
// victim (exercised by e2e/runtime_cap.sh).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "runtime.h"

int main(int argc, char **argv)
{
    struct runtime rt;
    if (runtime_bootstrap(&rt, &argc, &argv, NULL) < 0)
        return 1;
    int victim = argc > 1 ? atoi(argv[1]) : 2;
    const char *overrides[] = {"devices.memory_limit=16M", "devices.kind=cpu"};
    char err[512];
    if (runtime_load_config(&rt, NULL, overrides, 2, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return runtime_close(&rt, 2);
    }
    struct runtime_open_args args = {.min_bytes = 0, .quiet = 0};
    if (runtime_open(&rt, &args) < 0)
        return runtime_close(&rt, 1);
    void *a, *b;
    if (device_alloc(&rt.dev, 10u << 20, &a) < 0)
        FATAL(1, "first allocation failed");
    if (rt.rank == victim && device_alloc(&rt.dev, 8u << 20, &b) < 0)
        FATAL(1, "cannot continue without device memory");
    // The others wait here, in a host all-reduce of one int as a barrier:
    // the abort must free them.
    int32_t one = 1, ranks = 0;
    if (runtime_host_all_reduce(&rt, &one, &ranks, 1, COMM_INT32, COMM_SUM) < 0)
        FATAL(1, "the barrier failed");
    if (rt.rank == 0)
        printf("no rank exceeded its cap\n");
    return runtime_close(&rt, 0);
}
