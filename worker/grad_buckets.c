// grad_buckets.c: the gradient's all-reduce, bucket by bucket on a thread
// of its own while the backward pass goes on (grad_buckets.h).
//
// The thread is libvgpu's only caller of collectives while a step's pass
// runs: the pass itself calls no collective (libvgpu's threads rule, vgpu.h).
#include "grad_buckets.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

#define GRAD_BUCKETS_TRACED 4096 // buckets a step whose time of being final is kept (the
                                 // timeline's "gradient bucket" spans; past it, none)

struct grad_buckets {
    vgpu_t *v;
    float *grads;
    size_t count, size, n; // floats, floats a bucket, buckets
    struct grads_ready hook;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;   // the pass told, or a bucket is done, or stop
    // Under lock:
    size_t final_from;     // grads[final_from, count) are final this step
    uint64_t final_at[GRAD_BUCKETS_TRACED]; // since when bucket (from the top) is final
                           // (the timeline's clock; 0: no timeline)
    size_t next;           // buckets done this step (from the top); n: all
    int active;            // a step is between begin and finish
    int rc;                // the step's first failure
    int stop;
};

size_t grad_buckets_count_for(size_t count, size_t bucket_floats, size_t *size)
{
    size_t s = bucket_floats < GRAD_BUCKET_ALIGN ? GRAD_BUCKET_ALIGN : bucket_floats;
    s = (s + GRAD_BUCKET_ALIGN - 1) / GRAD_BUCKET_ALIGN * GRAD_BUCKET_ALIGN;
    *size = s;
    return (count + s - 1) / s;
}

// Bucket done-th from the top: [first, first + len).
static void bucket_(const struct grad_buckets *b, size_t done, size_t *first, size_t *len)
{
    const size_t k = b->n - 1 - done;
    *first = k * b->size;
    *len = (k + 1 == b->n ? b->count : *first + b->size) - *first;
}

static void *run_(void *arg)
{
    struct grad_buckets *b = arg;
    // Signals are for preempt.c's waiter thread (it takes the stop signals
    // with sigwait); faults stay here.
    sigset_t all;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&b->lock);
    for (;;) {
        size_t first = 0, len = 0;
        while (!b->stop) {
            if (b->active && b->next < b->n) {
                bucket_(b, b->next, &first, &len);
                if (b->final_from <= first)
                    break;
            }
            pthread_cond_wait(&b->cond, &b->lock);
        }
        if (b->stop)
            break;
        const size_t done = b->next;
        const uint64_t final_at = done < GRAD_BUCKETS_TRACED ? b->final_at[done] : 0;
        pthread_mutex_unlock(&b->lock);
        const uint64_t span = vgpu_span_begin();
        const int rc = vgpu_all_reduce(b->grads + first, b->grads + first, len, vgpu_float32,
                                       vgpu_sum, b->v);
        if (span && final_at)
            vgpu_span_end(b->v, vgpu_span_gradient_bucket, span,
                          (int64_t)(span > final_at ? span - final_at : 0), (int64_t)len);
        pthread_mutex_lock(&b->lock);
        if (rc < 0 && b->rc == 0)
            b->rc = rc;
        // After a failure the rest of the step is not issued: the peers
        // fail in theirs within comm.timeout_s, and the job ends.
        b->next = rc < 0 ? b->n : b->next + 1;
        pthread_cond_broadcast(&b->cond);
    }
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

// Buckets (from the top) whose floats are final once grads[from, count) are.
static size_t final_buckets_(const struct grad_buckets *b, size_t from)
{
    return b->n - (from + b->size - 1) / b->size;
}

static void tell_(void *arg, size_t from)
{
    struct grad_buckets *b = arg;
    const uint64_t now = vgpu_span_begin(); // 0 without a timeline
    pthread_mutex_lock(&b->lock);
    if (from < b->final_from) {
        const size_t before = final_buckets_(b, b->final_from), after = final_buckets_(b, from);
        for (size_t k = before; k < after && k < GRAD_BUCKETS_TRACED; k++)
            b->final_at[k] = now;
        b->final_from = from;
        pthread_cond_broadcast(&b->cond);
    }
    pthread_mutex_unlock(&b->lock);
}

int grad_buckets_open(struct grad_buckets **out, vgpu_t *v, float *grads, size_t count,
                      size_t bucket_floats)
{
    *out = NULL;
    struct grad_buckets *b = calloc(1, sizeof *b);
    if (!b)
        return VGPU_ENOMEM;
    b->v = v;
    b->grads = grads;
    b->count = count;
    b->n = grad_buckets_count_for(count, bucket_floats, &b->size);
    b->hook = (struct grads_ready){tell_, b};
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->cond, NULL);
    const int err = pthread_create(&b->thread, NULL, run_, b);
    if (err) {
        log_error("cannot start the thread that overlaps the all-reduce (train.bucket_mb): %s",
                  strerror(err));
        pthread_cond_destroy(&b->cond);
        pthread_mutex_destroy(&b->lock);
        free(b);
        return VGPU_ENOMEM;
    }
    *out = b;
    return 0;
}

void grad_buckets_close(struct grad_buckets *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&b->lock);
    b->stop = 1;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
    pthread_join(b->thread, NULL);
    pthread_cond_destroy(&b->cond);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

const struct grads_ready *grad_buckets_begin(struct grad_buckets *b)
{
    pthread_mutex_lock(&b->lock);
    b->final_from = b->count;
    b->next = 0;
    b->rc = 0;
    b->active = 1;
    pthread_mutex_unlock(&b->lock);
    return &b->hook;
}

int grad_buckets_finish(struct grad_buckets *b, double *waited_s)
{
    const double start = util_now_s();
    tell_(b, 0);
    pthread_mutex_lock(&b->lock);
    while (b->next < b->n)
        pthread_cond_wait(&b->cond, &b->lock);
    b->active = 0;
    const int rc = b->rc;
    pthread_mutex_unlock(&b->lock);
    *waited_s = util_now_s() - start;
    return rc;
}

size_t grad_buckets_n(const struct grad_buckets *b) { return b->n; }
