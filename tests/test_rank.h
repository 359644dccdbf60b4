// test_rank.h: one rank on a CPU-simulated virtual GPU for a unit test
// process, through libvgpu's public API as the trainer uses it (MPI as a
// singleton: no mpirun). A process joins one job, so a test file's cases
// share the device: test_rank_room(cap) leaves exactly `cap` bytes of room
// (rounded down to the allocation alignment) by holding the rest, which is
// a cap of that size as far as allocations can tell.
#ifndef VGPU_TEST_RANK_H
#define VGPU_TEST_RANK_H

#include <stdio.h>
#include <stdlib.h>

#include <vgpu/vgpu.h>
#include <vgpu/vgpu_ext.h>

static vgpu_t *test_rank_;
static void *test_rank_filler_;
static size_t test_rank_filler_bytes_;

// The rank, opened at the first call (64 MiB, one BLAS thread).
static vgpu_t *test_rank(void)
{
    if (test_rank_)
        return test_rank_;
    static const char *const sets[] = {"devices.kind=cpu", "devices.memory_limit=64M",
                                       "devices.cpu_threads=1"};
    const struct vgpu_options o = {.overrides = sets, .n_overrides = 3, .quiet = 1};
    const int rc = vgpu_init(&test_rank_, NULL, NULL, &o);
    if (rc < 0) {
        fprintf(stderr, "test_rank: vgpu_init: %s\n", vgpu_status_string(rc));
        exit(1);
    }
    return test_rank_;
}

// Bytes in use by the test (not the filler).
static size_t test_rank_in_use(void)
{
    size_t in_use = 0;
    vgpu_memory(test_rank(), &in_use, NULL, NULL);
    return in_use - test_rank_filler_bytes_;
}

// No filler: the whole cap is room again.
static void test_rank_release_room(void)
{
    if (test_rank_filler_)
        vgpu_free(test_rank(), test_rank_filler_);
    test_rank_filler_ = NULL;
    test_rank_filler_bytes_ = 0;
}

// Leaves `cap` bytes of room (nothing else may be allocated), returns the rank.
static vgpu_t *test_rank_room(size_t cap)
{
    vgpu_t *v = test_rank();
    test_rank_release_room();
    size_t in_use = 0, total = 0;
    vgpu_memory(v, &in_use, NULL, &total);
    const size_t room = cap / VGPU_MALLOC_ALIGN * VGPU_MALLOC_ALIGN;
    if (in_use || room > total) {
        fprintf(stderr, "test_rank_room: %zu bytes in use, room %zu of %zu\n", in_use, room, total);
        exit(1);
    }
    test_rank_filler_bytes_ = total - room;
    if (test_rank_filler_bytes_ && vgpu_malloc(v, &test_rank_filler_, test_rank_filler_bytes_) < 0)
        exit(1);
    return v;
}

static void test_rank_close(void)
{
    if (!test_rank_)
        return;
    test_rank_release_room();
    vgpu_finalize(test_rank_);
    test_rank_ = NULL;
}

// cmocka's group teardown: the rank leaves (MPI ends) after the last case.
static int test_rank_group_teardown(void **state)
{
    (void)state;
    test_rank_close();
    return 0;
}

#endif
