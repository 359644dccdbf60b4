// test_job_table.c: the job table (job_table.h): what it counts (physical
// GPUs, MIG instances, idle GPUs) and that every line fits 80 columns, with
// long host and device names, long reasons and many ranks.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_table.h"
#include "test_util.h"

#define GiB (1ull << 30)
#define MAXR 64

static struct job_row rows_[MAXR];

// n ranks on `hosts` hosts, k ranks a device; every device a GPU of its own
// PCI bus id unless mig (then instances of GPU 0 of the host).
static void fill_(int n, int hosts, int k, int mig, const char *name, const char *host_prefix,
                  int host_devices)
{
    memset(rows_, 0, sizeof rows_);
    for (int r = 0; r < n; r++) {
        struct job_row *w = &rows_[r];
        const int per_host = n / hosts, local = r % per_host, dev = local / k;
        w->rank = r;
        w->local_rank = local;
        w->node_index = r / per_host;
        w->device_index = dev;
        w->ranks_on_device = k;
        w->mig = mig;
        w->host_devices = host_devices;
        w->cap_bytes = (uint64_t)(r + 1) * GiB;
        snprintf(w->host, sizeof w->host, "%s%d", host_prefix, w->node_index);
        w->kind = DEVICE_KIND_CUDA;
        snprintf(w->name, sizeof w->name, "%s", name);
        snprintf(w->uuid, sizeof w->uuid, "%s-%02d", mig ? "MIG" : "GPU", dev);
        snprintf(w->pci_bus_id, sizeof w->pci_bus_id, "0000:%02x:00.0", mig ? 0x19 : 0x19 + dev);
    }
}

static char *print_(int n, const struct job_table_facts *facts)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    job_table_print(f, rows_, n, facts);
    fclose(f);
    return buf;
}

static void assert_fits_(const char *text)
{
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        assert_non_null(end);
        if (end - line > JOB_TABLE_COLUMNS)
            fail_msg("a line of %d columns: '%.*s'", (int)(end - line), (int)(end - line), line);
        line = end + 1;
    }
}

static const struct job_table_facts facts_ = {
    .hosts = 1,
    .backend = "ring",
    .backend_reason = "ranks share a GPU, which NCCL 2.28 refuses (\"Duplicate GPU detected\"; "
                      "NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1 allows it)",
    .need_bytes = 6815744,
    .from_env = "VGPU_MEMORY_LIMIT=4G (devices.memory_limit)",
};

static void test_one_gpu_shared(void **state)
{
    (void)state;
    fill_(4, 1, 4, 0, "NVIDIA H100 80GB HBM3", "gpu-node-", 1);
    assert_int_equal(job_table_count_devices(rows_, 4, 1), 1);
    assert_int_equal(job_table_count_mig(rows_, 4), 0);
    char *out = print_(4, &facts_);
    printf("%s", out);
    assert_fits_(out);
    assert_contains(out, "vgpu: 1 physical GPU -> 4 virtual GPUs (4 ranks, 1 host)\n");
    // The reason wraps under its text instead of running past 80 columns.
    assert_contains(out, "vgpu: collectives: ring (ranks share a GPU, which NCCL 2.28 refuses (\"Duplicate\n"
                         "      GPU detected\"; NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1 allows it))\n");
    assert_contains(out, "vgpu: each rank needs 6.5 MiB of device memory; the smallest cap is 1.0 GiB\n");
    assert_contains(out, "vgpu: from the environment: VGPU_MEMORY_LIMIT=4G (devices.memory_limit)\n");
    assert_contains(out, "rank  host       local  device                      virtual        cap\n");
    assert_contains(out, "   3  gpu-node-0     3  cuda0 NVIDIA H100 80GB HBM3   vgpu3    4.0 GiB\n");
    assert_null(strstr(out, "idle"));
    free(out);
}

// CPU-simulated devices: the headline gives each rank's BLAS threads, one
// count, or the range where machines differ.
static void test_cpu_threads(void **state)
{
    (void)state;
    fill_(4, 2, 1, 0, "AMD EPYC", "ns-h", 1);
    for (int r = 0; r < 4; r++) {
        rows_[r].kind = DEVICE_KIND_CPU;
        rows_[r].blas_threads = 1;
    }
    const struct job_table_facts two_hosts = {.hosts = 2, .backend = "ring",
                                              .backend_reason = "no CUDA device"};
    char *out = print_(4, &two_hosts);
    assert_fits_(out);
    assert_contains(out, "vgpu: no GPU: 4 CPU-simulated virtual GPUs (4 ranks, 2 hosts; BLAS: 1 thread)\n");
    free(out);
    rows_[3].blas_threads = 4;
    rows_[0].blas_threads = 2;
    out = print_(4, &two_hosts);
    assert_contains(out, "(4 ranks, 2 hosts; BLAS: 1-4\n      threads)\n"); // wrapped at 80
    free(out);
}

static void test_mig_and_idle(void **state)
{
    (void)state;
    // Four MIG instances of one GPU, an instance a rank: one physical GPU.
    fill_(4, 1, 1, 1, "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "h", 1);
    assert_int_equal(job_table_count_devices(rows_, 4, 1), 1);
    assert_int_equal(job_table_count_devices(rows_, 4, 0), 4);
    assert_int_equal(job_table_count_mig(rows_, 4), 4);
    char *out = print_(4, &facts_);
    printf("%s", out);
    assert_fits_(out);
    assert_contains(out, "vgpu: 1 physical GPU, 4 MIG instances -> 4 virtual GPUs (4 ranks, 1 host)");
    assert_contains(out, "cuda2 NVIDIA H100 80GB HBM3 MIG 1g.10gb");
    free(out);
    // 4 ranks on a host of 8 GPUs: 4 left idle, said.
    fill_(4, 1, 1, 0, "NVIDIA A100", "box", 8);
    assert_int_equal(job_table_count_devices(rows_, 4, 1), 4);
    out = print_(4, &facts_);
    assert_fits_(out);
    assert_contains(out, "vgpu: 4 of 8 GPUs on box0 left idle");
    free(out);
    fill_(8, 2, 1, 0, "NVIDIA A100", "box", 4); // every GPU used
    out = print_(8, &facts_);
    assert_null(strstr(out, "idle"));
    free(out);
}

static void test_long_names_many_ranks(void **state)
{
    (void)state;
    fill_(MAXR, 4, 2, 0, "A Very Long Accelerator Name That Goes On And On 80GB HBM3e", "a-very-long-hostname-", 8);
    struct job_table_facts f = facts_;
    f.hosts = 4;
    f.simulated = 1;
    char *out = print_(MAXR, &f);
    printf("%s", out);
    assert_fits_(out);
    assert_contains(out, "vgpu: 32 simulated physical GPUs -> 64 virtual GPUs (64 ranks, 4 hosts)\n");
    assert_contains(out, "vgpu: VGPU_SIM_GPUS: CPU math behind the GPUs' description\n");
    // The first JOB_TABLE_ROWS - 2 ranks, one line for the middle, the last.
    assert_contains(out, "... 49 more ranks (vgpu14..vgpu62)\n");
    assert_contains(out, "  63  a-very-long-host");
    assert_null(strstr(out, "\n  14  "));
    free(out);
    // A long host name loses its domain first.
    fill_(2, 2, 1, 0, "NVIDIA A100", "x", 1);
    snprintf(rows_[0].host, sizeof rows_[0].host, "gpu017.cluster.example.org");
    snprintf(rows_[1].host, sizeof rows_[1].host, "gpu018.cluster.example.org");
    f.hosts = 2;
    out = print_(2, &f);
    assert_fits_(out);
    assert_contains(out, "\n   0  gpu017               0  cuda0 NVIDIA A100");
    assert_contains(out, "\n   1  gpu018               0  cuda0 NVIDIA A100");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_gpu_shared),
        cmocka_unit_test(test_mig_and_idle),
        cmocka_unit_test(test_cpu_threads),
        cmocka_unit_test(test_long_names_many_ranks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
