// devcoll_world.c: the fork()ed ranks of devcoll_world.h.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "devcoll_world.h"
#include "util.h"

int world_me = -1;
static int arrivals_; // this child's world_wait calls so far

int world_wait(struct world *w, int n)
{
    const int target = n * ++arrivals_;
    atomic_fetch_add(&w->arrived, 1);
    const double until = util_now_s() + 30;
    while (atomic_load(&w->arrived) < target) {
        if (util_now_s() > until)
            return -1;
        usleep(100);
    }
    return 0;
}

int world_join(struct world *w, int rank, int n, uint64_t area_bytes, double timeout_s,
               devcoll_t **d)
{
    CHECK(devcoll_create(&devcoll_sim_exec, NULL, rank, n, area_bytes, timeout_s, d) == 0);
    devcoll_handle(*d, &w->h[rank]);
    CHECK(world_wait(w, n) == 0);
    CHECK(devcoll_connect(*d, w->h) == 0);
    // A rank that finished (or failed) early and exits takes its window
    // with it: none may go before every peer has opened it.
    CHECK(world_wait(w, n) == 0);
    return 0;
}

// Waits for the children until `deadline`, then kills those left;
// status[i]: the wait status, or -1 if killed.
static void reap_(const pid_t *pid, int n, double deadline, int *status)
{
    int done[DC_MAX_RANKS] = {0}, left = n;
    while (left > 0) {
        for (int i = 0; i < n; i++)
            if (!done[i] && waitpid(pid[i], &status[i], WNOHANG) == pid[i])
                done[i] = 1, left--;
        if (left > 0 && util_now_s() > deadline)
            for (int i = 0; i < n; i++)
                if (!done[i]) {
                    kill(pid[i], SIGKILL);
                    waitpid(pid[i], NULL, 0);
                    status[i] = -1;
                    done[i] = 1, left--;
                }
        if (left > 0)
            usleep(1000);
    }
}

void world_spawn(int n, world_rank_fn fn, const void *arg, int *status, double *took_s)
{
    struct world *w = mmap(NULL, sizeof *w, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                           -1, 0);
    assert_true(w != MAP_FAILED);
    memset(w, 0, sizeof *w);
    pid_t pid[DC_MAX_RANKS];
    int started = 0;
    const double t0 = util_now_s();
    fflush(NULL);
    for (; started < n; started++) {
        pid[started] = fork();
        if (pid[started] < 0)
            break;
        if (pid[started] == 0) {
            // A rank dies with the test (killed by ctest's timeout, say).
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() == 1)
                _exit(1);
            world_me = started;
            arrivals_ = 0;
            _exit(fn(w, started, n, arg));
        }
    }
    // Ranks that cannot all start would wait for the rest: end them now.
    reap_(pid, started, started < n ? t0 : t0 + WORLD_SPAWN_LIMIT_S, status);
    *took_s = util_now_s() - t0;
    munmap(w, sizeof *w);
    assert_int_equal(started, n);
}

int world_exited_ok(int st) { return st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0; }

double world_run(int n, world_rank_fn fn, const void *arg)
{
    int status[DC_MAX_RANKS];
    double took_s;
    world_spawn(n, fn, arg, status, &took_s);
    for (int r = 0; r < n; r++) {
        if (!world_exited_ok(status[r]))
            print_error("rank %d of %d: wait status %d\n", r, n, status[r]);
        assert_true(world_exited_ok(status[r]));
    }
    return took_s;
}
