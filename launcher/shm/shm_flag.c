// shm_flag.c: spin, yield, then futex: waiting on a shared progress counter.
#include "shm_flag.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "status.h"
#include "util.h"

// Longest single sleep: wakes come from the publisher, this only bounds how
// late the timeout and the half-time warning can be noticed.
#define SHM_WAIT_SLICE_S 0.05

static inline void cpu_relax_(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// FUTEX_WAIT without FUTEX_PRIVATE_FLAG: the word lives in a segment mapped by
// several processes (at different addresses), so the kernel must key it by
// the backing page, not by this process's address space.
static void futex_wait_(_Atomic uint32_t *word, uint32_t expected, double timeout_s)
{
    struct timespec ts;
    ts.tv_sec = (time_t)timeout_s;
    ts.tv_nsec = (long)((timeout_s - (double)ts.tv_sec) * 1e9);
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

static void futex_wake_all_(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void shm_flag_publish(struct shm_flag *f, uint64_t value)
{
    // Sequentially consistent on purpose (a Dekker pair with shm_flag_wait):
    // either the waiter sees the new value, or we see its sleepers count
    // and wake it. The seq bump makes a FUTEX_WAIT that races with this
    // publish return at once instead of sleeping through it.
    atomic_store(&f->value, value);
    atomic_fetch_add(&f->seq, 1);
    if (atomic_load(&f->sleepers) != 0)
        futex_wake_all_(&f->seq);
}

uint64_t shm_flag_read(struct shm_flag *f)
{
    return atomic_load_explicit(&f->value, memory_order_acquire);
}

int shm_flag_wait(struct shm_flag *f, uint64_t target, const struct shm_flag_wait_opts *o)
{
    // Beside the process's compute: straight to sleeping (util.h).
    const unsigned spins = util_waits_beside_compute ? 0 : o->spin_count;
    for (unsigned i = 0; i < spins; i++) {
        if (atomic_load_explicit(&f->value, memory_order_acquire) >= target)
            return 0;
        cpu_relax_();
    }
    struct util_wait_clock clock;
    util_wait_clock_start(&clock);
    if (o->yield_s > 0 && !util_waits_beside_compute) {
        const double until_s = clock.start_s + o->yield_s;
        do {
            sched_yield();
            if (atomic_load_explicit(&f->value, memory_order_acquire) >= target)
                return 0;
        } while (util_now_s() < until_s);
    }
    int warned = 0;
    for (;;) {
        uint32_t seq = atomic_load(&f->seq);
        atomic_fetch_add(&f->sleepers, 1);
        if (atomic_load(&f->value) >= target) {
            atomic_fetch_sub(&f->sleepers, 1);
            return 0;
        }
        double waited_s = util_wait_clock_waited(&clock);
        double slice_s = SHM_WAIT_SLICE_S;
        if (o->timeout_s > 0) {
            double left_s = o->timeout_s - waited_s;
            if (!warned && o->timeout_s / 2 - waited_s < left_s)
                left_s = o->timeout_s / 2 - waited_s;
            if (left_s < slice_s)
                slice_s = left_s > 1e-4 ? left_s : 1e-4;
        }
        futex_wait_(&f->seq, seq, slice_s);
        atomic_fetch_sub(&f->sleepers, 1);
        if (atomic_load_explicit(&f->value, memory_order_acquire) >= target)
            return 0;
        if (o->timeout_s > 0) {
            waited_s = util_wait_clock_waited(&clock);
            if (waited_s >= o->timeout_s) {
                if (o->waited_s)
                    *o->waited_s = waited_s;
                return VGPU_ETIMEOUT;
            }
            if (!warned && waited_s >= o->timeout_s / 2) {
                warned = 1;
                if (o->on_slow)
                    o->on_slow(o->arg, waited_s);
            }
        }
    }
}
