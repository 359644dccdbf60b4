// api_comm.c: libvgpu on a communicator of the program's, and vgpu_init's
// bounded waits (tests/e2e/api_comm.sh runs it).
//
//   api_comm split  MPI_COMM_WORLD split into even and odd ranks: two vgpu
//                   jobs side by side, each on its half; the program's own
//                   MPI_COMM_WORLD collectives run between vgpu's; MPI_Init's
//                   level refuses a collective from a thread of the program's
//   api_comm late   the program starts MPI; its last rank calls vgpu_init
//                   SECONDS late (argv[2]): the others return VGPU_ETIMEOUT
//                   instead of waiting for ever
//
// Exit status: 0 the checks held, 1 a check failed, 2 vgpu failed.
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vgpu/vgpu.h>
#include <vgpu/vgpu_ext.h>

static int failed_;

static void check_(int cond, int world_rank, const char *what)
{
    if (!cond) {
        fprintf(stderr, "api_comm: world rank %d: %s\n", world_rank, what);
        failed_ = 1;
    }
}

struct off_thread {
    vgpu_t *v;
    int64_t *d;
    int rc;
};

static void *all_reduce_off_thread_(void *arg)
{
    struct off_thread *o = arg;
    o->rc = vgpu_all_reduce(o->d, o->d, 1, vgpu_int64, vgpu_sum, o->v);
    return NULL;
}

static int split_(void)
{
    MPI_Init(NULL, NULL);
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half);
    int hrank, hsize;
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);

    // No communicator: refused before anything is joined (and the process
    // may still join).
    MPI_Comm none = MPI_COMM_NULL;
    const struct vgpu_options bad = {.quiet = 1, .mpi_comm = &none};
    vgpu_t *v;
    check_(vgpu_init(&v, NULL, NULL, &bad) == VGPU_EINVAL && !v, wrank, "MPI_COMM_NULL accepted");
    const struct vgpu_options opts = {.quiet = 1, .mpi_comm = &half};
    int rc = vgpu_init(&v, NULL, NULL, &opts);
    if (rc < 0) {
        fprintf(stderr, "api_comm: world rank %d: vgpu_init: %s\n", wrank, vgpu_status_string(rc));
        return 2;
    }
    check_(vgpu_rank(v) == hrank && vgpu_size(v) == hsize, wrank, "rank/size are not the half's");
    char backend[16];
    snprintf(backend, sizeof backend, "%s", vgpu_backend(v));

    // The half's sum of world ranks + 1, through vgpu; the program's own
    // world all-reduce between vgpu's calls.
    int64_t *d;
    rc = vgpu_malloc(v, (void **)&d, sizeof *d);
    int64_t mine = wrank + 1, got = 0, want = 0;
    for (int r = wrank % 2; r < wsize; r += 2)
        want += r + 1;
    if (rc == 0)
        rc = vgpu_memcpy_htod(v, d, &mine, sizeof mine);
    int world_sum = 0, one = 1;
    MPI_Allreduce(&one, &world_sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rc == 0)
        rc = vgpu_all_reduce(d, d, 1, vgpu_int64, vgpu_sum, v);
    if (rc == 0)
        rc = vgpu_memcpy_dtoh(v, &got, d, sizeof got);
    check_(world_sum == wsize, wrank, "the program's world all-reduce");
    check_(rc == 0 && got == want, wrank, "the half's all-reduce");
    // MPI_Init gives less than MPI_THREAD_SERIALIZED here (checked): a
    // collective from another thread is refused on the spot, on every rank.
    int level = MPI_THREAD_MULTIPLE;
    MPI_Query_thread(&level);
    check_(level < MPI_THREAD_SERIALIZED, wrank, "MPI_Init gave MPI_THREAD_SERIALIZED or more");
    struct off_thread o = {v, d, 0};
    pthread_t th;
    if (rc == 0 && pthread_create(&th, NULL, all_reduce_off_thread_, &o) == 0) {
        pthread_join(th, NULL);
        check_(o.rc == VGPU_EINVAL, wrank, "a collective off vgpu_init's thread was not refused");
    }
    // The half's root broadcasts its world rank.
    int32_t root_world = wrank;
    int32_t *b;
    if (rc == 0 && (rc = vgpu_malloc(v, (void **)&b, sizeof *b)) == 0) {
        rc = vgpu_memcpy_htod(v, b, &root_world, sizeof root_world);
        if (rc == 0)
            rc = vgpu_broadcast(b, b, 1, vgpu_int32, 0, v);
        if (rc == 0)
            rc = vgpu_memcpy_dtoh(v, &root_world, b, sizeof root_world);
        vgpu_free(v, b);
    }
    check_(rc == 0 && root_world == wrank % 2, wrank, "the half's broadcast");
    vgpu_free(v, d);
    if (rc < 0)
        fprintf(stderr, "api_comm: world rank %d: %s\n", wrank, vgpu_status_string(rc));
    rc = vgpu_finalize(v);
    check_(rc == 0, wrank, "vgpu_finalize");
    // MPI is the program's: still usable after vgpu_finalize.
    world_sum = 0;
    MPI_Allreduce(&one, &world_sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check_(world_sum == wsize, wrank, "MPI after vgpu_finalize");
    int all_ok = 0, ok = !failed_;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (wrank == 0)
        printf("api_comm: %d ranks as two vgpu jobs of %d and %d (%s): %s\n", wsize,
               (wsize + 1) / 2, wsize / 2, backend, all_ok ? "ok" : "FAILED");
    MPI_Comm_free(&half);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}

static int late_(int seconds)
{
    // MPI's own start waits for every rank (its wire-up): the program has
    // started it, and then its last rank is late to vgpu_init.
    MPI_Init(NULL, NULL);
    int wrank, wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (wrank == wsize - 1)
        sleep((unsigned)seconds);
    const struct vgpu_options opts = {.quiet = 1};
    vgpu_t *v;
    int rc = vgpu_init(&v, NULL, NULL, &opts);
    printf("api_comm: rank %d: vgpu_init returned %d (%s)\n", wrank, rc, vgpu_status_string(rc));
    fflush(stdout);
    if (rc == 0) {
        vgpu_finalize(v);
        return 1; // a late rank cannot have been waited for
    }
    // A second vgpu_init is refused: MPI has a request that cannot finish.
    vgpu_t *again;
    rc = vgpu_init(&again, NULL, NULL, &opts);
    printf("api_comm: rank %d: vgpu_init again returned %d (%s)\n", wrank, rc,
           vgpu_status_string(rc));
    fflush(stdout);
    return 2; // without MPI_Finalize: it would wait for the late rank
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "split"))
        return split_();
    if (argc >= 3 && !strcmp(argv[1], "late"))
        return late_(atoi(argv[2]));
    fprintf(stderr, "usage: api_comm split | api_comm late SECONDS\n");
    return 2;
}
