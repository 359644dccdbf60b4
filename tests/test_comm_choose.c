// test_comm_choose.c: the backend policy (comm_choose_backend), table-driven.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "comm_internal.h"
#include "ring_sub.h"
#include "status.h"

struct choose_case {
    const char *requested;
    struct comm_choice_facts f; // built, version, all_cuda, ranks a GPU, env, max_ctas, mps,
                                // mig, all_to_all, staged
    int want_rc;                // 0 or the expected error
    const char *want;           // chosen backend when want_rc == 0
    const char *why_has;        // a substring the reason must contain
};

#define OWN(v) {1, v, 1, 1, 0, 0, 0, 0, 0, 1}       // NCCL v, a GPU per rank
#define SHARE(v, k, env, ctas, mps) {1, v, 1, k, env, ctas, mps, 0, 0, 1}
#define MIG(v, k) {1, v, 1, k, 0, 0, 0, 1, 0, 1}    // k ranks a MIG instance
// Deterministic mode's all-to-all, on every rank CUDA (cuda), or staged
// memory somewhere (some CUDA ranks, VGPU_RING_STAGING=1), or neither.
#define TREE(cuda, v, k) {1, v, cuda, k, 0, 0, 0, 0, 1, cuda}
#define TREE_STAGED(v, k) {1, v, 0, k, 0, 0, 0, 0, 1, 1}

static const struct choose_case cases_[] = {
    // auto: nccl when built (>= 2.14) and every rank has its own GPU.
    {"auto", OWN(22809), 0, "nccl", "own GPU"},
    {NULL, OWN(22809), 0, "nccl", "own GPU"},
    {"", OWN(22809), 0, "nccl", "own GPU"},
    {"auto", OWN(21300), 0, "ring", "needs >= 2.14"},
    {"auto", OWN(0), 0, "ring", "NCCL could not be loaded at run time"},
    {"auto", {0, 0, 1, 1, 0, 0, 0, 0, 0, 1}, 0, "ring", "no NCCL backend"},
    {"auto", {1, 22809, 0, 1, 0, 0, 0, 0, 0, 0}, 0, "ring", "CUDA"},
    // Ranks sharing a GPU: only within what NCCL documents.
    {"auto", SHARE(22809, 2, 0, 0, 0), 0, "ring", "NCCL 2.28 refuses"},
    {"auto", SHARE(22809, 2, 1, 0, 0), 0, "ring", ">= 2.30"},
    {"auto", SHARE(23000, 2, 0, 0, 0), 0, "ring", "NCCL_MULTI_RANK_GPU_ENABLE=1 allows"},
    {"auto", SHARE(23000, 2, 1, 0, 0), 0, "nccl", "documented limits"},
    {"auto", SHARE(23000, 4, 1, 0, 0), 0, "ring", "4 ranks share a GPU; NCCL supports 2"},
    {"auto", SHARE(23000, 4, 1, 1, 0), 0, "ring", "unless MPS runs"},
    {"auto", SHARE(23000, 4, 1, 0, 1), 0, "ring", "NCCL_MAX_CTAS"},
    {"auto", SHARE(23105, 4, 1, 1, 1), 0, "nccl", "documented limits"},
    // MIG instances: NCCL does not support them (NVIDIA/nccl#1716), one a
    // rank or shared, whatever the version.
    {"auto", MIG(22809, 1), 0, "ring", "MIG instances, which NCCL does not support"},
    {"auto", MIG(23105, 2), 0, "ring", "MIG"},
    {"nccl", MIG(22809, 1), VGPU_ECONFIG, NULL, "MIG"},
    // Deterministic mode: its all-to-all on GPUs needs mpi; on CPUs the ring's.
    {"auto", TREE(1, 22809, 1), 0, "mpi", "deterministic mode on GPUs"},
    {"auto", TREE(1, 22809, 4), 0, "mpi", "deterministic mode on GPUs"},
    {NULL, TREE(1, 0, 4), 0, "mpi", "deterministic mode on GPUs"},
    {"ring", TREE(1, 22809, 4), VGPU_ECONFIG, NULL, "comm.backend = ring has no all-to-all on GPU"},
    {"nccl", TREE(1, 22809, 1), VGPU_ECONFIG, NULL, "use comm.backend = mpi or auto"},
    {"mpi", TREE(1, 22809, 1), 0, "mpi", "requested"},
    {"auto", TREE(0, 0, 4), 0, "ring", "not every rank has a CUDA device"},
    {"auto", TREE_STAGED(22809, 4), 0, "mpi", "deterministic mode on GPUs"},
    {"ring", TREE_STAGED(0, 4), VGPU_ECONFIG, NULL, "comm.backend = ring has no all-to-all"},
    {"ring", TREE(0, 0, 4), 0, "ring", "requested"},
    // explicit ring / mpi are always honoured.
    {"ring", OWN(22809), 0, "ring", "requested"},
    {"mpi", {0, 0, 0, 4, 0, 0, 0, 0, 0, 0}, 0, "mpi", "requested"},
    // explicit nccl.
    {"nccl", OWN(22809), 0, "nccl", "requested"},
    {"nccl", {0, 0, 1, 1, 0, 0, 0, 0, 0, 1}, VGPU_ECONFIG, NULL, "no NCCL backend"},
    {"nccl", {1, 22809, 0, 1, 0, 0, 0, 0, 0, 0}, VGPU_ECONFIG, NULL, "CUDA device"},
    {"nccl", OWN(21300), VGPU_ECONFIG, NULL, "2.13 found at run time"},
    {"nccl", OWN(0), VGPU_ECONFIG, NULL, "libnccl.so.2 not found"},
    {"nccl", SHARE(22809, 2, 0, 0, 0), VGPU_ECONFIG, NULL, "NCCL 2.28 refuses"},
    {"nccl", SHARE(23000, 3, 1, 0, 0), VGPU_ECONFIG, NULL, "use comm.backend = ring"},
    {"nccl", SHARE(23000, 2, 1, 0, 0), 0, "nccl", "requested"},
    // anything else is a configuration error that lists the choices.
    {"gloo", OWN(22809), VGPU_ECONFIG, NULL, "auto, ring, mpi or nccl"},
};

static void test_choose_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases_ / sizeof cases_[0]; i++) {
        const struct choose_case *t = &cases_[i];
        const char *chosen = "unset";
        char why[512] = "";
        int rc = comm_choose_backend(t->requested, &t->f, &chosen, why, sizeof why);
        if (rc != t->want_rc || (t->want && (!chosen || strcmp(chosen, t->want))) ||
            (!t->want && chosen) || !strstr(why, t->why_has))
            fail_msg("case %zu (%s, v %d, %d a GPU): rc %d chosen %s why '%s'", i,
                     t->requested ? t->requested : "NULL", t->f.nccl_version,
                     t->f.max_ranks_per_gpu, rc, chosen ? chosen : "NULL", why);
    }
}

static void test_choose_small_why(void **state)
{
    (void)state;
    const char *chosen = NULL;
    char why[8];
    const struct comm_choice_facts shared = SHARE(22809, 2, 0, 0, 0), none = {0};
    assert_int_equal(comm_choose_backend("nccl", &shared, &chosen, why, sizeof why), VGPU_ECONFIG);
    assert_int_equal(strlen(why), sizeof why - 1); // truncated, terminated
    assert_int_equal(comm_choose_backend("auto", &none, &chosen, NULL, 0), 0);
    assert_string_equal(chosen, "ring");
    assert_int_equal(comm_choose_backend("auto", &none, NULL, why, sizeof why), VGPU_EINVAL);
}

// How many ranks a GPU NCCL may run: what the automatic caps leave its
// buffers room for.
static void test_nccl_ranks_per_gpu(void **state)
{
    (void)state;
    const struct comm_choice_facts own = OWN(22809), old = OWN(21300), none = OWN(0),
                                   mig = MIG(23105, 1), tree = TREE(1, 22809, 1),
                                   two = SHARE(23000, 2, 1, 0, 0), two_no_env = SHARE(23000, 2, 0, 0, 0),
                                   many = SHARE(23105, 4, 1, 1, 1), cpu = {0, 0, 0, 1, 0, 0, 0, 0, 0, 0};
    assert_int_equal(comm_nccl_ranks_per_gpu(&own), 1);
    assert_int_equal(comm_nccl_ranks_per_gpu(&old), 0);
    assert_int_equal(comm_nccl_ranks_per_gpu(&none), 0);
    assert_int_equal(comm_nccl_ranks_per_gpu(&mig), 0);
    assert_int_equal(comm_nccl_ranks_per_gpu(&tree), 0);
    assert_int_equal(comm_nccl_ranks_per_gpu(&two), 2);
    assert_int_equal(comm_nccl_ranks_per_gpu(&two_no_env), 1);
    assert_int_equal(comm_nccl_ranks_per_gpu(&many), INT_MAX);
    assert_int_equal(comm_nccl_ranks_per_gpu(&cpu), 0);
}

static void test_find_ops(void **state)
{
    (void)state;
    assert_ptr_equal(comm_find_ops("ring"), &comm_ring_ops);
    assert_ptr_equal(comm_find_ops("mpi"), &comm_mpi_ops);
    assert_null(comm_find_ops("gloo"));
    assert_null(comm_find_ops(NULL));
#ifdef VGPU_HAVE_NCCL
    assert_non_null(comm_nccl_backend());
#else
    assert_null(comm_nccl_backend());
    assert_int_equal(comm_nccl_runtime_version(), 0);
#endif
    assert_ptr_equal(comm_find_ops("nccl"), comm_nccl_backend());
}

// The ring's window kind: device windows only for one host's ranks on one
// GPU without MIG; staging for other GPUs; host windows for CPU devices.
static void test_ring_window_kind(void **state)
{
    (void)state;
    struct ring_device_fact f[4];
    // One GPU under MPS without a pinned limit: the ranks run at once.
    const struct ring_device_fact gpu = {.node = 0, .cuda = 1, .mps = 1, .uuid = "GPU-a"};
    for (int q = 0; q < 4; q++)
        f[q] = gpu;
    for (int staging = -1; staging <= 0; staging++) { // unset, VGPU_RING_STAGING=0
        assert_int_equal(ring_window_kind(f, 4, 2, staging), RING_WINDOW_DEVICE);
        assert_int_equal(ring_window_kind(f, 1, 0, staging), RING_WINDOW_DEVICE);
    }
    assert_int_equal(ring_window_kind(f, 4, 2, 1), RING_WINDOW_STAGED); // VGPU_RING_STAGING=1
    // Without MPS the contexts take turns: staging, unless told otherwise.
    f[2].mps = 0; // one rank is enough
    assert_int_equal(ring_window_kind(f, 4, 0, -1), RING_WINDOW_STAGED);
    assert_int_equal(ring_window_kind(f, 4, 2, -1), RING_WINDOW_STAGED);
    assert_int_equal(ring_window_kind(f, 4, 0, 0), RING_WINDOW_DEVICE);
    f[2] = gpu;
    f[3].limited = 1; // an MPS pinned limit: the neighbour's arena would count against it
    assert_int_equal(ring_window_kind(f, 4, 0, -1), RING_WINDOW_STAGED);
    assert_int_equal(ring_window_kind(f, 4, 3, -1), RING_WINDOW_STAGED);
    assert_int_equal(ring_window_kind(f, 4, 3, 0), RING_WINDOW_DEVICE);
    f[3] = gpu;
    snprintf(f[3].uuid, sizeof f[3].uuid, "GPU-b"); // two GPUs
    for (int staging = -1; staging <= 0; staging++) {
        assert_int_equal(ring_window_kind(f, 4, 0, staging), RING_WINDOW_STAGED);
        assert_int_equal(ring_window_kind(f, 4, 3, staging), RING_WINDOW_STAGED);
    }
    f[3] = gpu;
    f[1].node = 1; // two hosts
    assert_int_equal(ring_window_kind(f, 4, 0, 0), RING_WINDOW_STAGED);
    f[1] = gpu;
    f[0].mig = f[1].mig = f[2].mig = f[3].mig = 1; // MIG: no CUDA IPC
    assert_int_equal(ring_window_kind(f, 4, 0, 0), RING_WINDOW_STAGED);
    assert_int_equal(ring_window_kind(f, 4, 0, -1), RING_WINDOW_STAGED);
    const struct ring_device_fact cpu = {.node = 0, .uuid = "cpu-boot"};
    for (int q = 0; q < 4; q++)
        f[q] = cpu;
    assert_int_equal(ring_window_kind(f, 4, 1, -1), RING_WINDOW_HOST);
    assert_int_equal(ring_window_kind(f, 4, 1, 0), RING_WINDOW_HOST);
    assert_int_equal(ring_window_kind(f, 4, 1, 1), RING_WINDOW_STAGED);
}

// The hierarchical all-reduce's shape: two hosts or more, the same number
// (two or more) of ranks on each, in any order.
static void test_hier_shape(void **state)
{
    (void)state;
    const int two_by_two[] = {0, 0, 1, 1}, interleaved[] = {0, 1, 0, 1}, three[] = {5, 5, 5, 9, 9, 9};
    const int uneven[] = {0, 0, 1}, singles[] = {0, 1, 2, 3}, one_host[] = {0, 0, 0, 0};
    const int three_hosts[] = {2, 0, 1, 0, 1, 2}, mixed[] = {0, 0, 1, 1, 2};
    assert_int_equal(ring_hier_shape(two_by_two, 4), 2);
    assert_int_equal(ring_hier_shape(interleaved, 4), 2);
    assert_int_equal(ring_hier_shape(three, 6), 3);
    assert_int_equal(ring_hier_shape(three_hosts, 6), 2);
    assert_int_equal(ring_hier_shape(uneven, 3), 0);
    assert_int_equal(ring_hier_shape(mixed, 5), 0);
    assert_int_equal(ring_hier_shape(singles, 4), 0);
    assert_int_equal(ring_hier_shape(one_host, 4), 0);
    assert_int_equal(ring_hier_shape(two_by_two, 1), 0);
}

// Device windows' small all-reduces go staged up to the H100's measured
// crossovers: 8 KiB for 2 ranks, 128 KiB for more; one rank has no ring.
static void test_device_small_bytes(void **state)
{
    (void)state;
    assert_int_equal(ring_device_small_bytes(1), 0);
    assert_int_equal(ring_device_small_bytes(2), 8 << 10);
    for (int n = 3; n <= 16; n++)
        assert_int_equal(ring_device_small_bytes(n), 128 << 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choose_table),
        cmocka_unit_test(test_choose_small_why),
        cmocka_unit_test(test_nccl_ranks_per_gpu),
        cmocka_unit_test(test_find_ops),
        cmocka_unit_test(test_ring_window_kind),
        cmocka_unit_test(test_hier_shape),
        cmocka_unit_test(test_device_small_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
