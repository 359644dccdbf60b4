// vnccl_join.c: how ranks meet without MPI, and how every wait stays bounded.
//
// The unique id holds a random nonce and the maker's boot id. The ranks of
// the id open the shared-memory segment named from the nonce: the first
// creates it (O_EXCL), sizes it for the rank count it was given, and marks it
// ready; the others map it, check the rank count and claim their slot. Once
// every rank has claimed one, the last unlinks the name: nothing stays in
// /dev/shm however the job ends later, and the mapping lives while any rank
// holds it. A rank count that differs, a rank claimed twice, or a rank of
// another host fails the communicator for every rank, and a rank that never
// comes costs the timeout (VGPU_COMM_TIMEOUT_S, as libvgpu's collectives).
//
// When the name goes: a failed communicator must stay findable for the ranks
// still to come, or they would make a fresh one and wait out the timeout. So
// the name is unlinked once as many processes have opened it as the largest
// rank count any of them was given, or, when the communicator failed, by the
// last of them to leave once at least the smallest count has come (a rank
// that was given one more than the others); on a timeout, by every waiter.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"
#include "util.h"
#include "vnccl.h"

#define VNCCL_STAGE_BYTES_DEFAULT (4u << 20)
#define VNCCL_HEAD_BYTES 4096
// How often a wait looks at its peers' processes and the failure flag, s.
#define VNCCL_WATCH_S 0.05
// Polls before a wait yields its core: many where each rank has a core of its
// own (a peer publishes within microseconds), few where the ranks outnumber
// the cores (the peer needs this very core: on 2 cores 4 ranks took 110 us
// an 8-byte all-reduce spinning 2000 polls first). As libvgpu's ring.
#define VNCCL_SPIN_DEDICATED 20000
#define VNCCL_SPIN_OVERSUBSCRIBED 20
#define VNCCL_YIELD_S 250e-6

static __thread char thread_error_[512];

const char *vnccl_thread_error(void) { return thread_error_; }

// A rank's stage: VGPU_NCCL_STAGE_KB, but at least 256 bytes a rank (each
// rank's p2p area is cut into a slice a peer, 64-byte aligned).
static uint64_t stage_bytes_(int nranks)
{
    const char *v = env_read("VGPU_NCCL_STAGE_KB");
    char *end;
    unsigned long kb = v ? strtoul(v, &end, 10) : 0;
    uint64_t bytes = VNCCL_STAGE_BYTES_DEFAULT;
    if (v && end != v && !*end && kb >= 4 && kb <= (1ul << 20))
        bytes = (uint64_t)kb << 10;
    else if (v)
        env_warn_malformed("VGPU_NCCL_STAGE_KB", v, "4 to 1048576");
    return bytes < (uint64_t)nranks * 256 ? (uint64_t)nranks * 256 : bytes;
}

static uint64_t machine_hash_(void)
{
    char id[128], host[64] = "";
    gethostname(host, sizeof host - 1);
    util_machine_id(id, sizeof id, host);
    return util_hash64(0, id, strlen(id)) | 1;
}

ncclResult_t vnccl_error(struct ncclComm *c, ncclResult_t status, const char *fmt, ...)
{
    char msg[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    // Said on stderr, except a bad argument (a program may probe; NCCL_DEBUG
    // set says those too): ncclGetLastError has every message.
    const char *debug = getenv("NCCL_DEBUG");
    const int say = status != ncclInvalidArgument || (debug && *debug);
    if (c)
        snprintf(c->last_error, sizeof c->last_error, "%s", msg);
    if (say && c)
        fprintf(stderr, "vgpu-nccl: rank %d of %d: %s\n", c->rank, c->nranks, msg);
    else if (say)
        fprintf(stderr, "vgpu-nccl: %s\n", msg);
    snprintf(thread_error_, sizeof thread_error_, "%s", msg);
    return status;
}

void vnccl_fail(struct ncclComm *c, ncclResult_t status, const char *fmt, ...)
{
    struct vnccl_head *h = c->head;
    if (!h)
        return;
    uint32_t expected = 0;
    if (atomic_compare_exchange_strong(&h->fail_claim, &expected, (uint32_t)c->rank + 1)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(h->why, sizeof h->why, fmt, ap);
        va_end(ap);
        atomic_store(&h->fail_status, (int32_t)status);
        atomic_store(&h->failed, 1); // after the reason: a reader of failed finds both
    }
    atomic_store(&c->async_error, (int)status);
}

ncclResult_t vnccl_failure(const struct ncclComm *c)
{
    if (!c->head || !atomic_load(&c->head->failed))
        return ncclSuccess;
    return (ncclResult_t)atomic_load(&c->head->fail_status);
}

ncclResult_t vnccl_make_id(struct vnccl_id *id)
{
    memset(id, 0, sizeof *id);
    if (getrandom(id->nonce, sizeof id->nonce, 0) != (ssize_t)sizeof id->nonce)
        return ncclSystemError;
    id->magic = VNCCL_ID_MAGIC;
    id->machine = machine_hash_();
    id->maker_pid = (uint32_t)getpid();
    return ncclSuccess;
}

void vnccl_derive_id(const struct vnccl_id *parent, uint64_t seq, int64_t color,
                     struct vnccl_id *out)
{
    *out = *parent;
    uint64_t h = util_hash64(0, parent->nonce, sizeof parent->nonce);
    h = util_hash64(h, &seq, sizeof seq);
    h = util_hash64(h, &color, sizeof color);
    out->nonce[0] = h;
    out->nonce[1] = util_hash64(h, parent->nonce, sizeof parent->nonce);
}

// A process that exited (or a zombie: exited, not yet reaped) is gone; this
// process (ranks that are threads of one) never.
static int process_gone_(uint32_t pid)
{
    return pid != 0 && pid != (uint32_t)getpid() && util_proc_gone((long)pid);
}

int vnccl_watch(struct ncclComm *c, int peer, const char *what)
{
    const int first = peer < 0 ? 0 : peer, last = peer < 0 ? c->nranks - 1 : peer;
    for (int r = first; r <= last; r++) {
        uint32_t pid = atomic_load(&c->slots[r].pid);
        if (process_gone_(pid)) {
            vnccl_fail(c, ncclRemoteError, "rank %d (pid %u) exited during %s", r, pid, what);
            return r;
        }
    }
    return -1;
}

ncclResult_t vnccl_wait(struct ncclComm *c, struct shm_flag *flag, uint64_t target, int peer,
                        const char *what)
{
    const struct shm_flag_wait_opts opts = {
        .timeout_s = VNCCL_WATCH_S, .spin_count = c->spin_count, .yield_s = VNCCL_YIELD_S};
    struct util_wait_clock clock;
    util_wait_clock_start(&clock);
    for (;;) {
        // Reached already: a failure since (a peer's abort after the call) is not this call's.
        if (shm_flag_read(flag) >= target)
            return ncclSuccess;
        ncclResult_t st = vnccl_failure(c);
        if (st != ncclSuccess) {
            atomic_store(&c->async_error, (int)st);
            return vnccl_error(c, st, "%s: %s", what, c->head->why);
        }
        if (shm_flag_wait(flag, target, &opts) == 0)
            return ncclSuccess;
        if (vnccl_watch(c, peer, what) >= 0)
            continue; // said through the failure flag
        double waited_s = util_wait_clock_waited(&clock);
        if (waited_s >= c->timeout_s) {
            vnccl_fail(c, ncclSystemError,
                       "rank %d did not arrive within %.0f s (VGPU_COMM_TIMEOUT_S) in %s", peer,
                       c->timeout_s, what);
            continue;
        }
    }
}

// Opens (or creates) the segment and maps its first page; *made: this rank made it.
static ncclResult_t open_segment_(struct ncclComm *c, int *fd_out, int *made)
{
    const double start_s = util_now_s();
    for (;;) {
        int fd = shm_open(c->name, O_RDWR | O_CREAT | O_EXCL, 0600);
        *made = fd >= 0;
        if (fd < 0 && errno == EEXIST)
            fd = shm_open(c->name, O_RDWR, 0600);
        if (fd >= 0) {
            *fd_out = fd;
            return ncclSuccess;
        }
        if (errno != ENOENT) // ENOENT: unlinked between the two opens; try again
            return vnccl_error(c, ncclSystemError, "cannot open shared memory %s: %s", c->name,
                               strerror(errno));
        if (util_now_s() - start_s > c->timeout_s)
            return vnccl_error(c, ncclSystemError, "cannot open shared memory %s", c->name);
        usleep(100);
    }
}

static uint64_t segment_bytes_(int nranks, uint64_t stage)
{
    uint64_t slots = (uint64_t)nranks * sizeof(struct vnccl_slot);
    uint64_t chans = (uint64_t)nranks * nranks * sizeof(struct vnccl_chan);
    uint64_t meta = VNCCL_HEAD_BYTES + ((slots + chans + 4095) & ~4095ull);
    return meta + (2 * (uint64_t)nranks + 1) * stage;
}

static void place_(struct ncclComm *c, char *base, int nranks, uint64_t stage)
{
    c->head = (struct vnccl_head *)base;
    c->slots = (struct vnccl_slot *)(base + VNCCL_HEAD_BYTES);
    c->chans = (struct vnccl_chan *)(c->slots + nranks);
    uint64_t meta = segment_bytes_(nranks, stage) - (2 * (uint64_t)nranks + 1) * stage;
    c->stage = base + meta;
    c->p2p = c->stage + (uint64_t)nranks * stage;
    c->result = c->p2p + (uint64_t)nranks * stage;
}

static void atomic_min_(_Atomic uint32_t *v, uint32_t x)
{
    uint32_t cur = atomic_load(v);
    while (x < cur && !atomic_compare_exchange_weak(v, &cur, x)) {}
}

static void atomic_max_(_Atomic uint32_t *v, uint32_t x)
{
    uint32_t cur = atomic_load(v);
    while (x > cur && !atomic_compare_exchange_weak(v, &cur, x)) {}
}

// Another process opened the segment, given nranks: the name goes once as
// many have come as the largest count given.
static void count_opening_(struct ncclComm *c, int nranks)
{
    struct vnccl_head *h = c->head;
    atomic_min_(&h->nranks_min, (uint32_t)nranks);
    atomic_max_(&h->nranks_max, (uint32_t)nranks);
    if (atomic_fetch_add(&h->opened, 1) + 1 >= atomic_load(&h->nranks_max))
        shm_unlink(c->name);
}

// The maker sizes and fills the segment; the others wait until it is ready.
static ncclResult_t map_segment_(struct ncclComm *c, int fd, int made, int nranks)
{
    if (made) {
        uint64_t stage = stage_bytes_(nranks), total = segment_bytes_(nranks, stage);
        if (ftruncate(fd, (off_t)total) != 0)
            return vnccl_error(c, ncclSystemError, "cannot size shared memory %s to %llu bytes: %s",
                               c->name, (unsigned long long)total, strerror(errno));
        char *base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED)
            return vnccl_error(c, ncclSystemError, "cannot map %s: %s", c->name, strerror(errno));
        place_(c, base, nranks, stage);
        c->map_bytes = total;
        c->head->nranks = (uint32_t)nranks;
        c->head->stage_bytes = stage;
        c->head->total_bytes = total;
        atomic_store(&c->head->opened, 1);
        atomic_store(&c->head->nranks_min, (uint32_t)nranks);
        atomic_store(&c->head->nranks_max, (uint32_t)nranks);
        atomic_store(&c->head->magic, VNCCL_SEG_MAGIC);
        if (nranks == 1)
            shm_unlink(c->name);
        return ncclSuccess;
    }
    const double start_s = util_now_s();
    struct stat st;
    while (fstat(fd, &st) == 0 && (uint64_t)st.st_size < VNCCL_HEAD_BYTES) {
        if (atomic_load(&c->aborted))
            return vnccl_error(c, ncclRemoteError, "ncclCommAbort during ncclCommInitRank");
        if (util_now_s() - start_s > c->timeout_s)
            return vnccl_error(c, ncclSystemError, "shared memory %s was never sized", c->name);
        usleep(1000);
    }
    struct vnccl_head *h = mmap(NULL, VNCCL_HEAD_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED)
        return vnccl_error(c, ncclSystemError, "cannot map %s: %s", c->name, strerror(errno));
    while (atomic_load(&h->magic) != VNCCL_SEG_MAGIC) {
        if (util_now_s() - start_s > c->timeout_s || atomic_load(&c->aborted)) {
            munmap(h, VNCCL_HEAD_BYTES);
            return vnccl_error(c, ncclSystemError, "shared memory %s was never made ready", c->name);
        }
        usleep(1000);
    }
    const uint64_t total = h->total_bytes, stage = h->stage_bytes;
    const int theirs = (int)h->nranks;
    munmap(h, VNCCL_HEAD_BYTES);
    char *base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED)
        return vnccl_error(c, ncclSystemError, "cannot map %s: %s", c->name, strerror(errno));
    place_(c, base, theirs, stage);
    c->map_bytes = total;
    count_opening_(c, nranks);
    if (theirs != nranks) {
        c->nranks = theirs; // so that the failure reaches its ranks
        vnccl_fail(c, ncclInvalidUsage,
                   "rank %d was given nranks %d, but the communicator was made for %d ranks",
                   c->rank, nranks, theirs);
        return vnccl_error(c, ncclInvalidUsage, "%s", c->head->why);
    }
    return ncclSuccess;
}

// Claims this rank's slot and waits for the others.
static ncclResult_t claim_and_meet_(struct ncclComm *c)
{
    struct vnccl_slot *me = &c->slots[c->rank];
    uint32_t none = 0, pid = (uint32_t)getpid();
    if (!atomic_compare_exchange_strong(&me->pid, &none, pid)) {
        vnccl_fail(c, ncclInvalidUsage, "rank %d was claimed twice (pids %u and %u)", c->rank,
                   none, pid);
        return vnccl_error(c, ncclInvalidUsage, "%s", c->head->why);
    }
    me->device = c->device;
    vnccl_current_device(me->bus_id, sizeof me->bus_id);
    atomic_fetch_add(&c->head->joined, 1);
    const double start_s = util_now_s();
    while (atomic_load(&c->head->joined) < (uint32_t)c->nranks) {
        ncclResult_t st = vnccl_failure(c);
        if (st != ncclSuccess)
            return vnccl_error(c, st, "%s", c->head->why);
        if (vnccl_watch(c, -1, "ncclCommInitRank") >= 0)
            continue;
        if (atomic_load(&c->aborted)) {
            vnccl_fail(c, ncclRemoteError, "rank %d aborted the communicator while it was made",
                       c->rank);
            continue;
        }
        if (util_now_s() - start_s > c->timeout_s) {
            char missing[160] = "";
            size_t at = 0;
            for (int r = 0; r < c->nranks && at < sizeof missing - 12; r++)
                if (!atomic_load(&c->slots[r].pid))
                    at += (size_t)snprintf(missing + at, sizeof missing - at, "%srank %d",
                                           at ? ", " : "", r);
            vnccl_fail(c, ncclSystemError,
                       "%u of %d ranks arrived within %.0f s (VGPU_COMM_TIMEOUT_S); missing: %s",
                       atomic_load(&c->head->joined), c->nranks, c->timeout_s, missing);
            shm_unlink(c->name);
            continue;
        }
        usleep(200);
    }
    return ncclSuccess;
}

ncclResult_t vnccl_join(struct ncclComm *c, int nranks, const struct vnccl_id *id, int rank)
{
    c->magic = VNCCL_COMM_MAGIC;
    c->rank = rank;
    c->nranks = nranks;
    c->id = *id;
    c->timeout_s = env_comm_timeout_s();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    c->spin_count = cores > 0 && nranks > cores ? VNCCL_SPIN_OVERSUBSCRIBED : VNCCL_SPIN_DEDICATED;
    c->device = vnccl_current_device(NULL, 0);
    snprintf(c->name, sizeof c->name, "/vgpu-nccl-%016llx%016llx",
             (unsigned long long)id->nonce[0], (unsigned long long)id->nonce[1]);
    if (id->magic != VNCCL_ID_MAGIC)
        return vnccl_error(c, ncclInvalidArgument,
                           "the unique id was not made by vgpu's ncclGetUniqueId (another NCCL's "
                           "id? one library must serve every rank)");
    if (id->machine != machine_hash_())
        return vnccl_error(c, ncclInvalidUsage,
                           "rank %d is on another host than the id's maker (pid %u): vgpu's NCCL "
                           "joins the ranks of one host; across hosts use the real NCCL",
                           rank, id->maker_pid);
    int fd = -1, made = 0;
    ncclResult_t st = open_segment_(c, &fd, &made);
    if (st != ncclSuccess)
        return st;
    st = map_segment_(c, fd, made, nranks);
    close(fd);
    if (st == ncclSuccess)
        st = claim_and_meet_(c);
    if (st != ncclSuccess)
        return st;
    c->p2p_sent = calloc((size_t)nranks, sizeof *c->p2p_sent);
    c->p2p_taken = calloc((size_t)nranks, sizeof *c->p2p_taken);
    if (!c->p2p_sent || !c->p2p_taken)
        return vnccl_error(c, ncclSystemError, "out of host memory");
    return vnccl_devcoll_setup(c);
}

void vnccl_leave(struct ncclComm *c)
{
    if (c->head)
        vnccl_devcoll_teardown(c);
    struct vnccl_head *h = c->head;
    if (h) { // a failed communicator's last process to leave, once enough have come
        uint32_t left = atomic_fetch_add(&h->left, 1) + 1;
        if (atomic_load(&h->failed) && left >= atomic_load(&h->opened) &&
            left >= atomic_load(&h->nranks_min))
            shm_unlink(c->name);
    }
    if (c->head)
        munmap(c->head, c->map_bytes);
    c->head = NULL;
    free(c->p2p_sent);
    free(c->p2p_taken);
    c->p2p_sent = c->p2p_taken = NULL;
}
