// ring_facts.c: what the ring backend's set-up decides from facts about the
// machine and the devices, apart from the set-up itself: the window kind,
// the cores a machine has, and what tells one machine from another.
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "comm_internal.h"

enum ring_window ring_window_kind(const struct ring_device_fact *facts, int n, int me,
                                  int staging)
{
    const struct ring_device_fact *mine = &facts[me];
    if (!mine->cuda)
        return staging == 1 ? RING_WINDOW_STAGED : RING_WINDOW_HOST;
    // Device windows need every rank on this host, on this very GPU (IPC
    // between processes of one device), and no MIG instance (no CUDA IPC).
    // And, unless asked for, a GPU that runs the ranks together: without MPS
    // their contexts take turns, and each of the ring's steps waits for a
    // switch (an H100: ~250 us a step; staged through host memory 2x faster
    // for the default job, 3-60x for all-reduces up to 64 MiB,
    // docs/gpu-runs/2026-11-26-h100.md); under an MPS pinned memory limit
    // the neighbour's mapped arena counts against it and fails to open.
    int device = staging != 1 && !mine->mig;
    for (int q = 0; q < n && device; q++)
        device = facts[q].cuda && !facts[q].mig && facts[q].node == mine->node &&
                 strcmp(facts[q].uuid, mine->uuid) == 0 &&
                 (staging == 0 || (facts[q].mps && !facts[q].limited));
    return device ? RING_WINDOW_DEVICE : RING_WINDOW_STAGED;
}

// Measured on an H100 under MPS (docs/gpu-runs/2026-11-26-h100.md, calls 2
// and 3): the ring over CUDA IPC costs 28-30 us (2 ranks) and 81-92 us (4)
// at any size up to 1 MiB, one stream synchronisation a step; staged
// through host memory, where the latency path runs, 23-26 us at 8 KiB for 2
// ranks (29 us at 16 KiB: no better) and 29-75 us up to 128 KiB for 4
// (104-124 us at 256 KiB). 3 ranks were not measured: they take the 4-rank
// threshold, which a third rank's extra step on the GPU only favours.
uint64_t ring_device_small_bytes(int n)
{
    return n < 2 ? 0 : n == 2 ? 8u << 10 : 128u << 10;
}

// CPUs this process may run on (its affinity mask; mpirun may bind ranks).
int ring_cpus_available(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) {
        int n = CPU_COUNT(&set);
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        // A rank bound to one core still shares the host with its peers:
        // what matters is how many cores the host's ranks have between them.
        return online > n ? (int)online : n;
    }
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}

