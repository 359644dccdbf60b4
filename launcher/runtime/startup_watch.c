// startup_watch.c: see startup_watch.h.
#include "startup_watch.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "status.h"
#include "util.h"

#define TICK_NS 100000000L // 0.1 s between looks

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    int running, stop;
    const char *stage;
    unsigned generation;   // bumped by every stage change
    double bound_s;
    struct startup_watch_hooks hooks;
} w_ = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

int startup_watch_expired(double waited_s, double bound_s) { return bound_s > 0 && waited_s > bound_s; }

static void *watch_(void *unused)
{
    (void)unused;
    struct util_wait_clock clock;
    util_wait_clock_start(&clock);
    pthread_mutex_lock(&w_.lock);
    unsigned seen = w_.generation;
    while (!w_.stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += TICK_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&w_.wake, &w_.lock, &until);
        if (w_.stop)
            break;
        if (w_.generation != seen) { // a new stage: its own clock
            seen = w_.generation;
            util_wait_clock_start(&clock);
            continue;
        }
        const struct startup_watch_hooks hooks = w_.hooks;
        const char *stage = w_.stage;
        const double bound = w_.bound_s;
        pthread_mutex_unlock(&w_.lock);
        if (hooks.beat)
            hooks.beat(hooks.arg);
        const double waited = util_wait_clock_waited(&clock);
        if (startup_watch_expired(waited, bound)) {
            char who[512] = "";
            if (hooks.describe)
                hooks.describe(hooks.arg, who, sizeof who);
            log_error("start-up did not finish: %.1f s in '%s' (bound %.1f s, comm.timeout_s)%s%s",
                      waited, stage, bound, who[0] ? ": " : "", who);
            fflush(stdout);
            fflush(stderr);
            // From this thread MPI may not be called (MPI_THREAD_FUNNELED);
            // the launcher ends the job when a rank exits.
            _exit(1);
        }
        pthread_mutex_lock(&w_.lock);
    }
    pthread_mutex_unlock(&w_.lock);
    return NULL;
}

int startup_watch_begin(const char *stage, double bound_s)
{
    pthread_mutex_lock(&w_.lock);
    w_.stage = stage;
    w_.bound_s = bound_s;
    w_.stop = 0;
    w_.generation++;
    int rc = 0;
    if (!w_.running) {
        rc = pthread_create(&w_.thread, NULL, watch_, NULL) == 0 ? 0 : VGPU_ENOMEM;
        w_.running = rc == 0;
    }
    pthread_mutex_unlock(&w_.lock);
    return rc;
}

void startup_watch_stage(const char *stage)
{
    pthread_mutex_lock(&w_.lock);
    w_.stage = stage;
    w_.generation++;
    pthread_cond_signal(&w_.wake);
    pthread_mutex_unlock(&w_.lock);
}

void startup_watch_set_bound(double bound_s)
{
    pthread_mutex_lock(&w_.lock);
    w_.bound_s = bound_s;
    pthread_mutex_unlock(&w_.lock);
}

void startup_watch_set_hooks(const struct startup_watch_hooks *hooks)
{
    pthread_mutex_lock(&w_.lock);
    w_.hooks = hooks ? *hooks : (struct startup_watch_hooks){0};
    pthread_mutex_unlock(&w_.lock);
}

void startup_watch_end(void)
{
    pthread_mutex_lock(&w_.lock);
    const int running = w_.running;
    w_.stop = 1;
    w_.running = 0;
    w_.hooks = (struct startup_watch_hooks){0};
    pthread_cond_signal(&w_.wake);
    pthread_mutex_unlock(&w_.lock);
    if (running)
        pthread_join(w_.thread, NULL);
}
