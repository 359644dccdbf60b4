// test_binding.c: the rank -> device and memory-cap policy, table-driven.
// Expected caps are worked out by hand in the comments, not by the formula
// under test.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "binding.h"
#include "gpu_driver.h"
#include "status.h"
#include "test_util.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define MAXR 8

// ---- device lists ----

static const struct device_info cpu_big[] = {
    {.kind = DEVICE_KIND_CPU, .index = 0, .name = "Test CPU", .total_bytes = 128 * GiB, .free_bytes = 64 * GiB},
};
static const struct device_info cpu_small[] = {
    {.kind = DEVICE_KIND_CPU, .index = 0, .name = "Small CPU", .total_bytes = 2 * GiB, .free_bytes = 1 * GiB},
};
static const struct device_info cpu_odd[] = { // free not a nice number
    {.kind = DEVICE_KIND_CPU, .index = 0, .name = "Odd CPU", .total_bytes = 2 * GiB, .free_bytes = 1000001000},
};
static const struct device_info gpu1[] = {
    {.kind = DEVICE_KIND_CUDA, .index = 0, .name = "NVIDIA H100 80GB HBM3", .total_bytes = 81 * GiB,
     .free_bytes = 80 * GiB, .pci_bus_id = "0000:19:00.0", .uuid = "GPU-aaaa"},
};
static const struct device_info gpu2[] = {
    {.kind = DEVICE_KIND_CUDA, .index = 0, .name = "GPU A", .total_bytes = 25 * GiB, .free_bytes = 24 * GiB,
     .pci_bus_id = "0000:19:00.0", .uuid = "GPU-a"},
    {.kind = DEVICE_KIND_CUDA, .index = 1, .name = "GPU B", .total_bytes = 25 * GiB, .free_bytes = 24 * GiB,
     .pci_bus_id = "0000:3b:00.0", .uuid = "GPU-b"},
};
static const struct device_info gpu4[] = {
    {.kind = DEVICE_KIND_CUDA, .index = 0, .name = "G0", .total_bytes = 17 * GiB, .free_bytes = 16 * GiB},
    {.kind = DEVICE_KIND_CUDA, .index = 1, .name = "G1", .total_bytes = 17 * GiB, .free_bytes = 16 * GiB},
    {.kind = DEVICE_KIND_CUDA, .index = 2, .name = "G2", .total_bytes = 17 * GiB, .free_bytes = 16 * GiB},
    {.kind = DEVICE_KIND_CUDA, .index = 3, .name = "G3", .total_bytes = 17 * GiB, .free_bytes = 16 * GiB},
};
// CUDA_VISIBLE_DEVICES=2,3: the list holds physical GPUs 2 and 3; ranks are
// bound to list entries 0 and 1.
static const struct device_info gpu_subset[] = {
    {.kind = DEVICE_KIND_CUDA, .index = 2, .name = "NVIDIA A100", .total_bytes = 41 * GiB,
     .free_bytes = 40 * GiB, .pci_bus_id = "0000:81:00.0", .uuid = "GPU-2222"},
    {.kind = DEVICE_KIND_CUDA, .index = 3, .name = "NVIDIA A100", .total_bytes = 41 * GiB,
     .free_bytes = 20 * GiB, .pci_bus_id = "0000:c1:00.0", .uuid = "GPU-3333"},
};
static const struct device_info gpu_excl[] = { // EXCLUSIVE_PROCESS, as clusters set them
    {.kind = DEVICE_KIND_CUDA, .index = 0, .name = "H100", .total_bytes = 81 * GiB, .free_bytes = 80 * GiB,
     .uuid = "GPU-excl", .compute_mode = GPU_MODE_EXCLUSIVE_PROCESS},
};
static const struct device_info gpu_prohibited[] = {
    {.kind = DEVICE_KIND_CUDA, .index = 0, .name = "H100", .total_bytes = 81 * GiB, .free_bytes = 80 * GiB,
     .uuid = "GPU-ok"},
    {.kind = DEVICE_KIND_CUDA, .index = 1, .name = "H100", .total_bytes = 81 * GiB, .free_bytes = 80 * GiB,
     .uuid = "GPU-no", .compute_mode = GPU_MODE_PROHIBITED},
};
// Under MPS: 80 GiB physically free, each client limited to 10 GiB.
static const struct device_info gpu_mps[] = {
    {.kind = DEVICE_KIND_CUDA, .index = 0, .name = "H100", .total_bytes = 81 * GiB, .free_bytes = 80 * GiB,
     .uuid = "GPU-mps", .client_limit_bytes = 10 * GiB},
};
// Per-task visibility: ranks 0-1 see only GPU A, ranks 2-3 only GPU B.
static const uint64_t vis_split[MAXR] = {1, 1, 2, 2};
static const uint64_t vis_one_blind[MAXR] = {1, 0, 1, 1};
static const uint64_t vis_reverse[MAXR] = {2, 1};
static const struct device_info gpu_tiny[] = { // less free than one context needs
    {.kind = DEVICE_KIND_CUDA, .index = 0, .name = "Busy GPU", .total_bytes = 16 * GiB, .free_bytes = 300 * MiB},
};

// A 10 GiB GPU: the automatic cap must leave a lone rank's NCCL buffers room.
static const struct device_info gpu_10g[] = {
    {.kind = DEVICE_KIND_CUDA, .index = 0, .name = "L4-ish", .total_bytes = 10 * GiB, .free_bytes = 10 * GiB,
     .uuid = "GPU-10g"},
};
// Two MIG instances of one GPU (one PCI bus id, a UUID each), one a rank.
static const struct device_info gpu_mig2[] = {
    {.kind = DEVICE_KIND_CUDA, .index = 0, .name = "H100 MIG 3g.40gb", .total_bytes = 40 * GiB,
     .free_bytes = 20 * GiB, .pci_bus_id = "0000:19:00.0", .uuid = "MIG-aaaa", .mig = 1},
    {.kind = DEVICE_KIND_CUDA, .index = 0, .name = "H100 MIG 3g.40gb", .total_bytes = 40 * GiB,
     .free_bytes = 20 * GiB, .pci_bus_id = "0000:19:00.0", .uuid = "MIG-bbbb", .mig = 1},
};
static const uint64_t vis_own_mig[MAXR] = {1, 2};

static const long map_1011[] = {1, 0, 1, 1};
static const long map_00[] = {0, 0};
static const long map_02[] = {0, 2};
static const long map_0m1[] = {0, -1};
static const long map_10[] = {1, 0};

struct binding_case {
    const char *name;
    int local_size;
    const struct device_info *devs;
    int ndevs;
    long ranks_per_device;
    uint64_t memory_limit;
    double memory_fraction;
    const long *map;
    int map_count;
    uint64_t overhead_bytes;
    uint64_t min_bytes;
    const uint64_t *visible;
    int mps;
    uint64_t backend_extra_bytes;
    int backend_max_ranks;
    // expected
    int rc;
    const char *needle[3]; // substrings of the message on failure
    int device[MAXR];
    int slot[MAXR];
    int ranks_on_device[MAXR];
    uint64_t cap[MAXR];
};

#define DEVS(d) (d), (int)TEST_ARRAY_LEN(d)

static const struct binding_case cases[] = {
    {"4 ranks on one CPU: default cap", 4, DEVS(cpu_big), .device = {0, 0, 0, 0},
     .slot = {0, 1, 2, 3}, .ranks_on_device = {4, 4, 4, 4},
     // 64 GiB / 2 / 4 = 8 GiB > the 256 MiB default
     .cap = {256 * MiB, 256 * MiB, 256 * MiB, 256 * MiB}},
    {"CPU default cap halved free limit", 4, DEVS(cpu_small), .device = {0, 0, 0, 0},
     .slot = {0, 1, 2, 3}, .ranks_on_device = {4, 4, 4, 4},
     // 1 GiB / 2 / 4 = 128 MiB < 256 MiB
     .cap = {128 * MiB, 128 * MiB, 128 * MiB, 128 * MiB}},
    {"one rank, one CPU", 1, DEVS(cpu_small), .device = {0}, .slot = {0}, .ranks_on_device = {1},
     .cap = {256 * MiB}}, // 1 GiB / 2 = 512 MiB > 256 MiB
    {"fewer ranks than devices", 2, DEVS(gpu4), .device = {0, 1}, .slot = {0, 0},
     .ranks_on_device = {1, 1},
     // CUDA auto, no overhead: 0.9 * 16 GiB = 15461882265.6 -> 15461882112 (x256)
     .cap = {15461882112ull, 15461882112ull}},
    {"more ranks than devices", 8, DEVS(gpu4), .memory_limit = 1 * GiB,
     .device = {0, 0, 1, 1, 2, 2, 3, 3}, .slot = {0, 1, 0, 1, 0, 1, 0, 1},
     .ranks_on_device = {2, 2, 2, 2, 2, 2, 2, 2},
     .cap = {GiB, GiB, GiB, GiB, GiB, GiB, GiB, GiB}},
    {"uneven: 5 ranks on 2 devices -> 3 + 2", 5, DEVS(gpu2), .memory_limit = 512 * MiB,
     .device = {0, 0, 0, 1, 1}, .slot = {0, 1, 2, 0, 1}, .ranks_on_device = {3, 3, 3, 2, 2},
     .cap = {512 * MiB, 512 * MiB, 512 * MiB, 512 * MiB, 512 * MiB}},
    {"ranks_per_device = 1", 2, DEVS(gpu2), .ranks_per_device = 1, .memory_limit = GiB,
     .device = {0, 1}, .slot = {0, 0}, .ranks_on_device = {1, 1}, .cap = {GiB, GiB}},
    {"ranks_per_device packs ranks onto the first device", 2, DEVS(gpu2), .ranks_per_device = 2,
     .memory_limit = GiB, .device = {0, 0}, .slot = {0, 1}, .ranks_on_device = {2, 2},
     .cap = {GiB, GiB}},
    {"ranks_per_device too small", 5, DEVS(gpu2), .ranks_per_device = 2, .rc = VGPU_ECONFIG,
     .needle = {"local rank 4 has no device", "ranks_per_device", "room for 4"}},
    {"explicit map", 4, DEVS(gpu2), .map = map_1011, .map_count = 4, .memory_limit = GiB,
     .device = {1, 0, 1, 1}, .slot = {0, 0, 1, 2}, .ranks_on_device = {3, 1, 3, 3},
     .cap = {GiB, GiB, GiB, GiB}},
    {"explicit map onto one device", 2, DEVS(gpu2), .map = map_00, .map_count = 2,
     .memory_limit = GiB, .device = {0, 0}, .slot = {0, 1}, .ranks_on_device = {2, 2},
     .cap = {GiB, GiB}},
    {"map of wrong length", 4, DEVS(gpu2), .map = map_00, .map_count = 2, .rc = VGPU_ECONFIG,
     .needle = {"devices.map", "2 devices", "4 ranks"}},
    {"map to a device that is not there", 2, DEVS(gpu2), .map = map_02, .map_count = 2,
     .rc = VGPU_ECONFIG, .needle = {"local rank 1", "device 2", "0..1"}},
    {"map with a negative device", 2, DEVS(gpu2), .map = map_0m1, .map_count = 2,
     .rc = VGPU_ECONFIG, .needle = {"local rank 1", "device -1", ""}},
    {"map and ranks_per_device conflict", 2, DEVS(gpu2), .map = map_10, .map_count = 2,
     .ranks_per_device = 1, .rc = VGPU_ECONFIG,
     .needle = {"devices.map", "devices.ranks_per_device", "conflict"}},
    {"memory_limit and memory_fraction conflict", 2, DEVS(gpu2), .memory_limit = GiB,
     .memory_fraction = 0.5, .rc = VGPU_ECONFIG,
     .needle = {"devices.memory_limit", "devices.memory_fraction", "conflict"}},
    {"fraction split among a device's ranks", 4, DEVS(gpu1), .memory_fraction = 0.5,
     .overhead_bytes = 500 * MiB, .device = {0, 0, 0, 0}, .slot = {0, 1, 2, 3},
     .ranks_on_device = {4, 4, 4, 4},
     // 0.5 * 80 GiB / 4 = 10 GiB
     .cap = {10 * GiB, 10 * GiB, 10 * GiB, 10 * GiB}},
    {"fraction per device, uneven sharing", 3, DEVS(gpu_subset), .memory_fraction = 0.75,
     .device = {0, 0, 1}, .slot = {0, 1, 0}, .ranks_on_device = {2, 2, 1},
     // 0.75 * 40 GiB / 2 = 15 GiB; 0.75 * 20 GiB / 1 = 15 GiB
     .cap = {15 * GiB, 15 * GiB, 15 * GiB}},
    {"fraction rounds caps down to 256 bytes", 3, DEVS(cpu_odd), .memory_fraction = 1.0,
     .device = {0, 0, 0}, .slot = {0, 1, 2}, .ranks_on_device = {3, 3, 3},
     // 1000001000 / 3 = 333333666.67 -> 333333504 = 1302084 * 256
     .cap = {333333504ull, 333333504ull, 333333504ull}},
    {"memory_limit that fits", 2, DEVS(cpu_big), .memory_limit = 3 * GiB, .device = {0, 0},
     .slot = {0, 1}, .ranks_on_device = {2, 2}, .cap = {3 * GiB, 3 * GiB}},
    {"memory_limit rounded down to 256 bytes", 1, DEVS(cpu_big), .memory_limit = 1000,
     .device = {0}, .slot = {0}, .ranks_on_device = {1}, .cap = {768}},
    {"memory_limit that does not fit", 4, DEVS(gpu1), .memory_limit = 30 * GiB,
     .rc = VGPU_ECONFIG,
     // 4 x 30 GiB = 120 GiB > 80 GiB
     .needle = {"cuda0", "120.0 GiB", "80.0 GiB"}},
    {"overhead makes it fit no more", 2, DEVS(gpu1), .memory_limit = 39 * GiB + 512 * MiB,
     .overhead_bytes = 600 * MiB, .rc = VGPU_ECONFIG,
     // 79 GiB of caps + 2 x 600 MiB = 80.2 GiB > 80 GiB
     .needle = {"overhead", "600.0 MiB", "80.0 GiB"}},
    {"same limit without overhead fits", 2, DEVS(gpu1), .memory_limit = 39 * GiB + 512 * MiB,
     .device = {0, 0}, .slot = {0, 1}, .ranks_on_device = {2, 2},
     .cap = {39 * GiB + 512 * MiB, 39 * GiB + 512 * MiB}},
    {"CUDA auto: 0.9 of free minus overhead", 2, DEVS(gpu1), .overhead_bytes = 512 * MiB,
     .device = {0, 0}, .slot = {0, 1}, .ranks_on_device = {2, 2},
     // (80 GiB - 2 x 512 MiB) = 79 GiB; x 0.9 / 2 = 38171521843.2 -> 38171521792
     .cap = {38171521792ull, 38171521792ull}},
    {"CUDA auto, one rank", 1, DEVS(gpu1), .overhead_bytes = 600 * MiB, .device = {0},
     .slot = {0}, .ranks_on_device = {1},
     // (80 GiB - 600 MiB) x 0.9 = 76743180288 (already a multiple of 256)
     .cap = {76743180288ull}},
    {"CUDA auto, 5 ranks on 2 GPUs with overhead", 5, DEVS(gpu2), .overhead_bytes = 700 * MiB,
     .device = {0, 0, 0, 1, 1}, .slot = {0, 1, 2, 0, 1}, .ranks_on_device = {3, 3, 3, 2, 2},
     // GPU A: (24 GiB - 3 x 700 MiB) x 0.9 / 3 = 7070338048
     // GPU B: (24 GiB - 2 x 700 MiB) x 0.9 / 2 = 10935808768
     .cap = {7070338048ull, 7070338048ull, 7070338048ull, 10935808768ull, 10935808768ull}},
    {"CUDA_VISIBLE_DEVICES subset: list entries, not physical ids", 4, DEVS(gpu_subset),
     .memory_limit = 4 * GiB, .device = {0, 0, 1, 1}, .slot = {0, 1, 0, 1},
     .ranks_on_device = {2, 2, 2, 2}, .cap = {4 * GiB, 4 * GiB, 4 * GiB, 4 * GiB}},
    {"subset: the full device is named in errors", 4, DEVS(gpu_subset), .memory_limit = 12 * GiB,
     .rc = VGPU_ECONFIG,
     // entry 1 (physical GPU 3) has 20 GiB free for 2 x 12 GiB
     .needle = {"cuda3", "24.0 GiB", "20.0 GiB"}},
    {"zero devices", 2, NULL, 0, .rc = VGPU_ECONFIG, .needle = {"rank 0 has no device", "", ""}},
    {"zero ranks", 0, DEVS(cpu_big), .rc = VGPU_ECONFIG, .needle = {"no ranks", "", ""}},
    {"min_bytes above the cap", 2, DEVS(cpu_big), .min_bytes = 300 * MiB, .rc = VGPU_ECONFIG,
     .needle = {"local rank 0", "256.0 MiB", "300.0 MiB"}},
    {"min_bytes below the cap", 2, DEVS(cpu_big), .min_bytes = 200 * MiB, .device = {0, 0},
     .slot = {0, 1}, .ranks_on_device = {2, 2}, .cap = {256 * MiB, 256 * MiB}},
    {"min_bytes against an explicit limit", 1, DEVS(cpu_big), .memory_limit = 64 * MiB,
     .min_bytes = 65 * MiB, .rc = VGPU_ECONFIG,
     .needle = {"64.0 MiB", "65.0 MiB", "devices.memory_limit"}},
    {"a bare number is bytes, and says so", 1, DEVS(cpu_big), .memory_limit = 1,
     .rc = VGPU_ECONFIG, .needle = {"devices.memory_limit = 1 B", "256 B", "without a unit is bytes"}},
    {"caps whose sum overflows 64 bits", 2, DEVS(cpu_big), .memory_limit = 9223372036871553024ull,
     .rc = VGPU_ECONFIG,
     // 2 x (2^63 + 16 MiB) wraps to 32 MiB without saturation, and "fits"
     .needle = {"cannot hold its 2 ranks", "only 64.0 GiB is free", ""}},
    {"per-task visibility: each rank on what it sees", 4, DEVS(gpu2), .visible = vis_split,
     .memory_limit = GiB, .device = {0, 0, 1, 1}, .slot = {0, 1, 0, 1},
     .ranks_on_device = {2, 2, 2, 2}, .cap = {GiB, GiB, GiB, GiB}},
    {"per-task visibility, in the order the ranks see them", 2, DEVS(gpu2), .visible = vis_reverse,
     .memory_limit = GiB, .device = {1, 0}, .slot = {0, 0}, .ranks_on_device = {1, 1},
     .cap = {GiB, GiB}},
    {"a rank that sees no device while others do", 4, DEVS(gpu2), .visible = vis_one_blind,
     .rc = VGPU_ECONFIG, .needle = {"local rank 1 sees no device", "CUDA_VISIBLE_DEVICES", ""}},
    {"devices.map to a device the rank does not see", 4, DEVS(gpu2), .visible = vis_split,
     .map = map_1011, .map_count = 4, .rc = VGPU_ECONFIG,
     .needle = {"local rank 0 is bound to cuda1", "does not see it", "GPU-b"}},
    {"EXCLUSIVE_PROCESS with 2 ranks and no MPS", 2, DEVS(gpu_excl), .overhead_bytes = 512 * MiB,
     .rc = VGPU_ECONFIG, .needle = {"EXCLUSIVE_PROCESS", "2 ranks are bound", "vgpurun --mps"}},
    {"EXCLUSIVE_PROCESS with 2 ranks under MPS", 2, DEVS(gpu_excl), .overhead_bytes = 512 * MiB,
     .mps = 1, .memory_limit = 8 * GiB, .device = {0, 0}, .slot = {0, 1},
     .ranks_on_device = {2, 2}, .cap = {8 * GiB, 8 * GiB}},
    {"EXCLUSIVE_PROCESS with one rank", 1, DEVS(gpu_excl), .memory_limit = 8 * GiB,
     .device = {0}, .slot = {0}, .ranks_on_device = {1}, .cap = {8 * GiB}},
    {"a PROHIBITED device is never bound", 2, DEVS(gpu_prohibited), .map = map_10, .map_count = 2,
     .rc = VGPU_ECONFIG, .needle = {"local rank 0 is bound to cuda1", "PROHIBITED", ""}},
    {"MPS: caps against physical free, each under its client limit", 4, DEVS(gpu_mps),
     .overhead_bytes = 512 * MiB, .mps = 1, .memory_limit = 9 * GiB + 512 * MiB,
     // 4 x (9.5 GiB + 512 MiB) = 40 GiB <= 80 GiB physically free; 10 GiB each <= the limit
     .device = {0, 0, 0, 0}, .slot = {0, 1, 2, 3}, .ranks_on_device = {4, 4, 4, 4},
     .cap = {9 * GiB + 512 * MiB, 9 * GiB + 512 * MiB, 9 * GiB + 512 * MiB, 9 * GiB + 512 * MiB}},
    {"MPS: auto cap kept under the client limit", 2, DEVS(gpu_mps), .overhead_bytes = 512 * MiB,
     .mps = 1,
     // 0.9 x (80 GiB - 1 GiB) / 2 = 35.55 GiB, above 10 GiB - 512 MiB = 9.5 GiB
     .device = {0, 0}, .slot = {0, 1}, .ranks_on_device = {2, 2},
     .cap = {9 * GiB + 512 * MiB, 9 * GiB + 512 * MiB}},
    {"MPS: an explicit cap over the client limit", 1, DEVS(gpu_mps), .overhead_bytes = 512 * MiB,
     .mps = 1, .memory_limit = 10 * GiB, .rc = VGPU_ECONFIG,
     .needle = {"over its MPS limit 10.0 GiB", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", ""}},
    {"GPU with less free than the overhead", 1, DEVS(gpu_tiny), .overhead_bytes = 500 * MiB,
     .rc = VGPU_ECONFIG, .needle = {"local rank 0", "cuda0", "0 bytes"}},
    {"a lone rank's auto cap leaves NCCL's buffers room", 1, DEVS(gpu_10g),
     .overhead_bytes = 512 * MiB, .backend_extra_bytes = GiB, .backend_max_ranks = 1,
     // 0.9 x (10 GiB - 512 MiB - 1 GiB) = 8214124953.6, down to 256 bytes
     .device = {0}, .slot = {0}, .ranks_on_device = {1}, .cap = {8214124800ull}},
    {"ranks sharing a GPU NCCL refuses leave it no room (the ring runs)", 2, DEVS(gpu_10g),
     .overhead_bytes = 512 * MiB, .backend_extra_bytes = GiB, .backend_max_ranks = 1,
     // 0.9 x (10 GiB - 2 x 512 MiB) / 2 = 4348654387.2, down to 256 bytes
     .device = {0, 0}, .slot = {0, 1}, .ranks_on_device = {2, 2},
     .cap = {4348654336ull, 4348654336ull}},
    {"two ranks a GPU under NCCL >= 2.30's multi-rank mode keep NCCL's room", 2, DEVS(gpu_10g),
     .overhead_bytes = 512 * MiB, .backend_extra_bytes = GiB, .backend_max_ranks = 2,
     // 0.9 x (10 GiB - 2 x (512 MiB + 1 GiB)) / 2 = 3382286745.6, down to 256 bytes
     .device = {0, 0}, .slot = {0, 1}, .ranks_on_device = {2, 2},
     .cap = {3382286592ull, 3382286592ull}},
    {"no backend room where the backend cannot run (MIG, the ring)", 1, DEVS(gpu_10g),
     .overhead_bytes = 512 * MiB, .backend_extra_bytes = GiB, .backend_max_ranks = 0,
     // 0.9 x (10 GiB - 512 MiB) = 9180492595.2, down to 256 bytes
     .device = {0}, .slot = {0}, .ranks_on_device = {1}, .cap = {9180492544ull}},
    {"MPS: a lone rank's NCCL room counts against its client limit", 1, DEVS(gpu_mps),
     .overhead_bytes = 512 * MiB, .mps = 1, .backend_extra_bytes = GiB, .backend_max_ranks = 1,
     // 10 GiB - 512 MiB - 1 GiB = 8.5 GiB, under 0.9 x (80 - 1.5) GiB
     .device = {0}, .slot = {0}, .ranks_on_device = {1}, .cap = {8 * GiB + 512 * MiB}},
    {"MIG: an instance a rank, each by its own view", 2, DEVS(gpu_mig2), .visible = vis_own_mig,
     .overhead_bytes = 512 * MiB,
     // 0.9 x (20 GiB - 512 MiB) = 18844169011.2, down to 256 bytes
     .device = {0, 1}, .slot = {0, 0}, .ranks_on_device = {1, 1},
     .cap = {18844168960ull, 18844168960ull}},
};

static void check_case_(const struct binding_case *t)
{
    struct binding_request req = {
        .local_size = t->local_size,
        .ndevices = t->ndevs,
        .devices = t->devs,
        .ranks_per_device = t->ranks_per_device,
        .memory_limit = t->memory_limit,
        .memory_fraction = t->memory_fraction,
        .map = t->map,
        .map_count = t->map_count,
        .overhead_bytes = t->overhead_bytes,
        .min_bytes = t->min_bytes,
        .visible = t->visible,
        .mps = t->mps,
        .backend_extra_bytes = t->backend_extra_bytes,
        .backend_max_ranks = t->backend_max_ranks,
    };
    struct binding out[MAXR], placed[MAXR];
    memset(out, 0xA5, sizeof out);
    char err[512] = "", place_err[512] = "";
    int rc = binding_compute(&req, out, err, sizeof err);
    // binding_place is the same placement without the caps: it agrees with
    // binding_compute wherever that got as far as the caps.
    int place_rc = binding_place(&req, placed, place_err, sizeof place_err);
    if (place_rc == 0 && rc == 0)
        for (int r = 0; r < t->local_size; r++) {
            assert_int_equal(placed[r].device, out[r].device);
            assert_int_equal(placed[r].slot, out[r].slot);
            assert_int_equal(placed[r].ranks_on_device, out[r].ranks_on_device);
            assert_int_equal(placed[r].cap_bytes, 0);
        }
    else if (place_rc < 0 && strcmp(place_err, err) != 0)
        fail_msg("case '%s': binding_place refused (%s) but binding_compute said '%s'", t->name,
                 place_err, err);
    fprintf(stderr, "  case '%s': rc %d%s%s\n", t->name, rc, err[0] ? ": " : "", err);
    if (rc != t->rc)
        fail_msg("case '%s': rc %d, want %d (%s)", t->name, rc, t->rc, err);
    if (rc) {
        for (int i = 0; i < 3; i++)
            if (t->needle[i])
                assert_contains(err, t->needle[i]);
        return;
    }
    for (int r = 0; r < t->local_size; r++) {
        if (out[r].device != t->device[r] || out[r].slot != t->slot[r] ||
            out[r].ranks_on_device != t->ranks_on_device[r] || out[r].cap_bytes != t->cap[r])
            fail_msg("case '%s', rank %d: device %d slot %d ranks_on_device %d cap %llu; want "
                     "%d %d %d %llu",
                     t->name, r, out[r].device, out[r].slot, out[r].ranks_on_device,
                     (unsigned long long)out[r].cap_bytes, t->device[r], t->slot[r],
                     t->ranks_on_device[r], (unsigned long long)t->cap[r]);
        assert_int_equal(out[r].cap_bytes % ARENA_ALIGN, 0);
        assert_true(out[r].cap_bytes > 0);
    }
}

static void test_binding_table(void **state)
{
    (void)state;
    assert_true(TEST_ARRAY_LEN(cases) >= 15);
    for (size_t i = 0; i < TEST_ARRAY_LEN(cases); i++)
        check_case_(&cases[i]);
}

// Properties over many shapes: every rank gets a device, slots on a device
// are 0..k-1 exactly once, and the caps plus overhead fit each device.
static void test_binding_invariants(void **state)
{
    (void)state;
    for (int nd = 1; nd <= 4; nd++)
        for (int n = 1; n <= MAXR; n++)
            for (uint64_t overhead = 0; overhead <= 512 * MiB; overhead += 512 * MiB) {
                struct binding_request req = {.local_size = n, .ndevices = nd, .devices = gpu4,
                                              .overhead_bytes = overhead};
                struct binding out[MAXR];
                char err[512] = "";
                int rc = binding_compute(&req, out, err, sizeof err);
                if (rc)
                    fail_msg("%d ranks on %d GPUs: %s", n, nd, err);
                for (int dev = 0; dev < nd; dev++) {
                    int count = 0, seen[MAXR] = {0};
                    uint64_t sum = 0;
                    for (int r = 0; r < n; r++) {
                        assert_in_range(out[r].device, 0, nd - 1);
                        if (out[r].device != dev)
                            continue;
                        count++;
                        sum += out[r].cap_bytes + overhead;
                        assert_in_range(out[r].slot, 0, MAXR - 1);
                        seen[out[r].slot]++;
                    }
                    for (int r = 0; r < n; r++)
                        if (out[r].device == dev)
                            assert_int_equal(out[r].ranks_on_device, count);
                    for (int s = 0; s < count; s++)
                        assert_int_equal(seen[s], 1);
                    assert_true(sum <= gpu4[dev].free_bytes);
                    // The policy spreads ranks: no device gets more than ceil(n / nd).
                    assert_true(count <= (n + nd - 1) / nd);
                }
            }
}

// What the backend allocates outside the caps must fit beside them.
static void test_headroom(void **state)
{
    (void)state;
    char err[512];
    const struct binding one = {.device = 0, .ranks_on_device = 1, .cap_bytes = 78 * GiB};
    assert_int_equal(binding_check_headroom(&one, &gpu1[0], 512 * MiB, GiB, "NCCL buffers", err,
                                            sizeof err),
                     0); // 78 + 0.5 + 1 = 79.5 GiB <= 80 GiB
    const struct binding big = {.device = 0, .ranks_on_device = 1, .cap_bytes = 79 * GiB};
    assert_int_equal(binding_check_headroom(&big, &gpu1[0], 512 * MiB, GiB, "NCCL buffers", err,
                                            sizeof err),
                     VGPU_ECONFIG);
    assert_contains(err, "cap 79.0 GiB + CUDA context 512.0 MiB + NCCL buffers 1.0 GiB) = 80.5 GiB");
    // Two ranks a GPU: 2 x (38 + 0.5 + 1) = 79 GiB fits; 2 x (39 + 1.5) = 81 GiB does not.
    const struct binding two = {.device = 0, .ranks_on_device = 2, .cap_bytes = 38 * GiB};
    assert_int_equal(binding_check_headroom(&two, &gpu1[0], 512 * MiB, GiB, "NCCL buffers", err,
                                            sizeof err),
                     0);
    const struct binding two_big = {.device = 0, .ranks_on_device = 2, .cap_bytes = 39 * GiB};
    assert_int_equal(binding_check_headroom(&two_big, &gpu1[0], 512 * MiB, GiB, "NCCL buffers",
                                            err, sizeof err),
                     VGPU_ECONFIG);
    assert_contains(err, "cannot hold 2 x");
    // Under MPS each rank's whole use must stay within its client limit:
    // 8 + 0.5 + 1 = 9.5 GiB fits 10 GiB; 9 + 0.5 + 1 = 10.5 GiB does not.
    const struct binding mps_ok = {.device = 0, .ranks_on_device = 1, .cap_bytes = 8 * GiB};
    assert_int_equal(binding_check_headroom(&mps_ok, &gpu_mps[0], 512 * MiB, GiB, "NCCL buffers",
                                            err, sizeof err),
                     0);
    const struct binding mps_over = {.device = 0, .ranks_on_device = 1, .cap_bytes = 9 * GiB};
    assert_int_equal(binding_check_headroom(&mps_over, &gpu_mps[0], 512 * MiB, GiB,
                                            "NCCL buffers", err, sizeof err),
                     VGPU_ECONFIG);
    assert_contains(err, "= 10.5 GiB is over this rank's MPS limit 10.0 GiB");
}

// The launcher's placement (vgpurun-rank) refuses what the runtime refuses:
// EXCLUSIVE_PROCESS shared without MPS; with MPS it places.
static void test_place(void **state)
{
    (void)state;
    struct binding out[MAXR];
    char err[512] = "";
    struct binding_request req = {.local_size = 4, .ndevices = 1, .devices = gpu_excl};
    assert_int_equal(binding_place(&req, out, err, sizeof err), VGPU_ECONFIG);
    assert_contains(err, "EXCLUSIVE_PROCESS");
    req.mps = 1;
    assert_int_equal(binding_place(&req, out, err, sizeof err), 0);
    assert_int_equal(out[3].ranks_on_device, 4);
    // 3 ranks a device over 2 devices: 3 + 1, as the runtime places them.
    const struct binding_request rpd = {.local_size = 4, .ndevices = 2, .devices = gpu2,
                                        .ranks_per_device = 3};
    assert_int_equal(binding_place(&rpd, out, err, sizeof err), 0);
    assert_int_equal(out[2].device, 0);
    assert_int_equal(out[3].device, 1);
    assert_int_equal(out[0].ranks_on_device, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binding_table),
        cmocka_unit_test(test_binding_invariants),
        cmocka_unit_test(test_headroom),
        cmocka_unit_test(test_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
