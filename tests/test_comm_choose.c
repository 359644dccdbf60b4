// test_comm_choose.c: the backend policy (comm_choose_backend), table-driven,
// and the shared-memory name format.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "comm_internal.h"
#include "status.h"

struct choose_case {
    const char *requested;
    int nccl_built, share, all_cuda, version, multi_env;
    int want_rc;          // 0 or the expected error
    const char *want;     // chosen backend when want_rc == 0
    const char *why_has;  // a substring the reason must contain
};

static const struct choose_case cases_[] = {
    // auto: nccl only when built and every rank has its own GPU.
    {"auto", 1, 0, 1, 22809, 0, 0, "nccl", "own GPU"},
    {NULL, 1, 0, 1, 22809, 0, 0, "nccl", "own GPU"},
    {"", 1, 0, 1, 22809, 0, 0, "nccl", "own GPU"},
    {"auto", 1, 1, 1, 22809, 0, 0, "ring", "share a GPU"},
    {"auto", 1, 1, 1, 23000, 1, 0, "ring", "share a GPU"}, // the opt-in is for explicit nccl
    {"auto", 0, 0, 1, 0, 0, 0, "ring", "not built"},
    {"auto", 1, 0, 0, 22809, 0, 0, "ring", "CUDA"},
    {"auto", 0, 0, 0, 0, 0, 0, "ring", "not built"},
    // explicit ring / mpi are always honoured.
    {"ring", 1, 0, 1, 22809, 0, 0, "ring", "requested"},
    {"mpi", 0, 1, 0, 0, 0, 0, "mpi", "requested"},
    // explicit nccl.
    {"nccl", 1, 0, 1, 22809, 0, 0, "nccl", "requested"},
    {"nccl", 0, 0, 1, 0, 0, VGPU_ECONFIG, NULL, "no NCCL backend"},
    {"nccl", 1, 0, 0, 22809, 0, VGPU_ECONFIG, NULL, "CUDA device on every rank"},
    {"nccl", 1, 1, 1, 22809, 0, VGPU_ECONFIG, NULL, "NCCL 2.28 refuses"},
    {"nccl", 1, 1, 1, 22809, 1, VGPU_ECONFIG, NULL, "NCCL_MULTI_RANK_GPU_ENABLE=1"},
    {"nccl", 1, 1, 1, 23000, 0, VGPU_ECONFIG, NULL, "comm.backend = ring"},
    {"nccl", 1, 1, 1, 23000, 1, 0, "nccl", "experimental"},
    {"nccl", 1, 1, 1, 23105, 1, 0, "nccl", "2.31"},
    // anything else is a configuration error that lists the choices.
    {"gloo", 1, 0, 1, 22809, 0, VGPU_ECONFIG, NULL, "auto, ring, mpi or nccl"},
};

static void test_choose_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases_ / sizeof cases_[0]; i++) {
        const struct choose_case *t = &cases_[i];
        const char *chosen = "unset";
        char why[512] = "";
        int rc = comm_choose_backend(t->requested, t->nccl_built, t->share, t->all_cuda,
                                     t->version, t->multi_env, &chosen, why, sizeof why);
        if (rc != t->want_rc || (t->want && (!chosen || strcmp(chosen, t->want))) ||
            (!t->want && chosen) || !strstr(why, t->why_has))
            fail_msg("case %zu (%s, built %d, share %d, cuda %d, v %d, env %d): rc %d chosen %s "
                     "why '%s'",
                     i, t->requested ? t->requested : "NULL", t->nccl_built, t->share, t->all_cuda,
                     t->version, t->multi_env, rc, chosen ? chosen : "NULL", why);
    }
}

static void test_choose_small_why(void **state)
{
    (void)state;
    const char *chosen = NULL;
    char why[8];
    assert_int_equal(comm_choose_backend("nccl", 1, 1, 1, 22809, 0, &chosen, why, sizeof why),
                     VGPU_ECONFIG);
    assert_int_equal(strlen(why), sizeof why - 1); // truncated, terminated
    assert_int_equal(comm_choose_backend("auto", 0, 0, 0, 0, 0, &chosen, NULL, 0), 0);
    assert_string_equal(chosen, "ring");
    assert_int_equal(comm_choose_backend("auto", 0, 0, 0, 0, 0, NULL, why, sizeof why),
                     VGPU_EINVAL);
}

static void test_find_ops(void **state)
{
    (void)state;
    assert_ptr_equal(comm_find_ops("ring"), &comm_ring_ops);
    assert_ptr_equal(comm_find_ops("mpi"), &comm_mpi_ops);
    assert_null(comm_find_ops("gloo"));
    assert_null(comm_find_ops(NULL));
#ifdef VGPU_HAVE_NCCL
    assert_ptr_equal(comm_find_ops("nccl"), &comm_nccl_ops);
#else
    assert_null(comm_find_ops("nccl"));
    assert_int_equal(comm_nccl_runtime_version(), 0);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_choose_table),
        cmocka_unit_test(test_choose_small_why),
        cmocka_unit_test(test_find_ops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
