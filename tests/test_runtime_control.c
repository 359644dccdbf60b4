// test_runtime_control.c: the runtime's control plane (launcher/runtime/control.c):
// each host collective's MPI call (runtime_host_*, libvgpu's vgpu_host_*),
// a broadcast's 1 GiB pieces, the arrival board, the
// bounded wait that ends the job naming the host-mate that has not arrived,
// and runtime_load_config's "rank 0 decides"; comm.c's comm_mpi_wait (hooks,
// bound, stopped time) and comm_agree (all or none). One process, no mpirun.
//
// Why this shape: the runtime's three files are #included to build struct
// runtime_impl's board by hand and reach their statics; the static
// vgpu_launcher never pulls in its own bootstrap.o, control.o or runtime.o
// (every symbol they define is defined here), so comm.c and the rest link as
// they are.
// MPI, util_now_s and the log are --wrap'ped: no MPI_Init, and a fake clock in
// steps of 2^-7 s makes every bound exact and instant.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap.c"
#include "control.c"
#include "runtime.c"
#include "test_util.h"

#define GIB ((size_t)1 << 30)
#define STEP_S (1.0 / 128) // the fake clock's tick: sums of it are exact
#define NEVER_READ ((void *)(uintptr_t)0x70000000) // a buffer the mocks never dereference

// Asserts lo <= got <= hi for seconds (cmocka's float assert is single precision).
#define assert_seconds_between(got, lo, hi)                                                        \
    do {                                                                                           \
        const double g_ = (got), lo_ = (lo), hi_ = (hi);                                           \
        if (!(g_ >= lo_ && g_ <= hi_))                                                             \
            fail_msg("%s = %.9g s, want [%.9g, %.9g]", #got, g_, lo_, hi_);                        \
    } while (0)

// ---- the fake clock (util_now_s) ----

static struct {
    int real;      // read the real monotonic clock
    double now_s;  // the last reading
    double step_s; // advance per reading
} clock_;

double __real_util_now_s(void);
double __wrap_util_now_s(void)
{
    if (clock_.real)
        return __real_util_now_s();
    clock_.now_s += clock_.step_s;
    return clock_.now_s;
}

// ---- the log: captured, then printed as usual ----

static struct {
    char fatal[2048];
    char warnings[4096], errors[4096]; // one message a line
    int n_warnings, n_errors;
} log_;

static void append_line_(char *buf, size_t bytes, const char *msg)
{
    const size_t len = strlen(buf);
    snprintf(buf + len, bytes - len, "%s\n", msg);
}

// Formats a message into msg and keeps it as one more line of lines.
static void record_(char *msg, size_t msg_bytes, char *lines, size_t lines_bytes, int *count,
                    const char *fmt, va_list ap) VGPU_PRINTF(6, 0);
static void record_(char *msg, size_t msg_bytes, char *lines, size_t lines_bytes, int *count,
                    const char *fmt, va_list ap)
{
    vsnprintf(msg, msg_bytes, fmt, ap);
    append_line_(lines, lines_bytes, msg);
    (*count)++;
}

void __real_log_warn(const char *fmt, ...) VGPU_PRINTF(1, 2);
void __wrap_log_warn(const char *fmt, ...) VGPU_PRINTF(1, 2);
void __wrap_log_warn(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    record_(msg, sizeof msg, log_.warnings, sizeof log_.warnings, &log_.n_warnings, fmt, ap);
    va_end(ap);
    __real_log_warn("%s", msg);
}

void __real_log_error(const char *fmt, ...) VGPU_PRINTF(1, 2);
void __wrap_log_error(const char *fmt, ...) VGPU_PRINTF(1, 2);
void __wrap_log_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    record_(msg, sizeof msg, log_.errors, sizeof log_.errors, &log_.n_errors, fmt, ap);
    va_end(ap);
    __real_log_error("%s", msg);
}

// FATAL's message is kept, then the real path runs: print, the fatal hook.
void __real_log_fatal_at(const char *file, int line, int exit_code, const char *fmt, ...)
    VGPU_PRINTF(4, 5) VGPU_NORETURN;
void __wrap_log_fatal_at(const char *file, int line, int exit_code, const char *fmt, ...)
    VGPU_PRINTF(4, 5) VGPU_NORETURN;
void __wrap_log_fatal_at(const char *file, int line, int exit_code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(log_.fatal, sizeof log_.fatal, fmt, ap);
    va_end(ap);
    __real_log_fatal_at(file, line, exit_code, "%s", log_.fatal);
}

// ---- the fake MPI ----

static int request_obj_, sub_comm_obj_;
#define FAKE_REQUEST ((MPI_Request)(void *)&request_obj_)
#define SUB_COMM ((MPI_Comm)(void *)&sub_comm_obj_) // a communicator other than the world

// MPI handles are pointers in Open MPI: a mismatch names them, not addresses.
static const char *handle_name_(uintptr_t h)
{
    const struct {
        uintptr_t h;
        const char *name;
    } names[] = {
        {(uintptr_t)MPI_MIN, "MPI_MIN"},   {(uintptr_t)MPI_MAX, "MPI_MAX"},
        {(uintptr_t)MPI_SUM, "MPI_SUM"},   {(uintptr_t)MPI_INT, "MPI_INT"},
        {(uintptr_t)MPI_INT32_T, "MPI_INT32_T"}, {(uintptr_t)MPI_DOUBLE, "MPI_DOUBLE"},
        {(uintptr_t)MPI_BYTE, "MPI_BYTE"},
        {(uintptr_t)MPI_COMM_WORLD, "MPI_COMM_WORLD"}, {(uintptr_t)SUB_COMM, "SUB_COMM"},
    };
    for (size_t i = 0; i < TEST_ARRAY_LEN(names); i++)
        if (names[i].h == h)
            return names[i].name;
    return "another handle";
}

static int check_handle_(const LargestIntegralType got, const LargestIntegralType want)
{
    if (got == want)
        return 1;
    print_error("got %s, want %s\n", handle_name_((uintptr_t)got), handle_name_((uintptr_t)want));
    return 0;
}

#define expect_handle_(function, parameter, handle)                                                \
    expect_check(function, parameter, check_handle_, (uintptr_t)(handle))

// The host-mates in the fixture; MPI_Test refreshes the beat of those marked
// as polling the same collective, as their own waits would.
struct fixture;
static struct fixture *fx_;
static void beat_polling_peers_(void);

// MPI_Test: which call completes or fails, and a pause of this process.
static struct {
    int done_on_poll;       // this call (1-based, counted over the test) completes; 0 = never
    int fail_on_poll;       // this call returns an MPI error; 0 = never
    int stop_on_poll;       // before this call, the process is stopped for stopped_s
    double stopped_s;
    int polls;              // MPI_Test calls so far
    double clock_at_done_s; // the clock's last reading when the request completed
} test_;

int __wrap_MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    (void)status;
    assert_ptr_equal(*request, FAKE_REQUEST); // waits on the request the call gave
    test_.polls++;
    if (test_.polls == test_.stop_on_poll)
        clock_.now_s += test_.stopped_s;
    beat_polling_peers_();
    if (test_.polls == test_.fail_on_poll)
        return MPI_ERR_REQUEST;
    *flag = test_.done_on_poll && test_.polls >= test_.done_on_poll;
    if (*flag)
        test_.clock_at_done_s = clock_.now_s;
    return MPI_SUCCESS;
}

// The rest of the job, as one pretend rank: what it brings to a reduction.
static struct {
    int value;            // to an MPI_INT or MPI_INT32_T reduction
    const double *values; // to an MPI_DOUBLE reduction
} peer_;

static struct {
    const void *sendbuf;
    void *recvbuf;
} last_reduce_;

static double reduce_(MPI_Op op, double a, double b)
{
    if (op == MPI_MIN)
        return a < b ? a : b;
    if (op == MPI_MAX)
        return a > b ? a : b;
    if (op == MPI_SUM)
        return a + b;
    fail_msg("reduction with an op the control plane does not use");
    return 0;
}

int __wrap_MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm, MPI_Request *request)
{
    check_expected(count);
    check_expected_ptr(datatype);
    check_expected_ptr(op);
    check_expected_ptr(comm);
    const int rc = mock_type(int);
    if (rc != MPI_SUCCESS)
        return rc;
    last_reduce_.sendbuf = sendbuf;
    last_reduce_.recvbuf = recvbuf;
    const void *mine = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    for (int i = 0; i < count; i++) {
        if (datatype == MPI_INT || datatype == MPI_INT32_T)
            ((int *)recvbuf)[i] = (int)reduce_(op, ((const int *)mine)[i], peer_.value);
        else
            ((double *)recvbuf)[i] = reduce_(op, ((const double *)mine)[i], peer_.values[i]);
    }
    *request = FAKE_REQUEST;
    return MPI_SUCCESS;
}

static void expect_allreduce_(int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, int rc)
{
    expect_value(__wrap_MPI_Iallreduce, count, count);
    expect_handle_(__wrap_MPI_Iallreduce, datatype, type);
    expect_handle_(__wrap_MPI_Iallreduce, op, op);
    expect_handle_(__wrap_MPI_Iallreduce, comm, comm);
    will_return(__wrap_MPI_Iallreduce, rc);
}

static int record_bcast_(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
static int recording_bcasts_(void);

int __wrap_MPI_Ibcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                      MPI_Request *request)
{
    if (recording_bcasts_()) { // runtime_load_config's tests
        *request = FAKE_REQUEST;
        return record_bcast_(buffer, count, datatype, root, comm);
    }
    check_expected_ptr(buffer);
    check_expected(count);
    check_expected_ptr(datatype);
    check_expected(root);
    check_expected_ptr(comm);
    *request = FAKE_REQUEST;
    return MPI_SUCCESS;
}

int __wrap_MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                          int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request)
{
    check_expected_ptr(sendbuf);
    check_expected(sendcount);
    check_expected_ptr(sendtype);
    check_expected_ptr(recvbuf);
    check_expected(recvcount);
    check_expected_ptr(recvtype);
    check_expected_ptr(comm);
    *request = FAKE_REQUEST;
    return MPI_SUCCESS;
}

// runtime_load_config's verdict as it travels (a local struct there).
struct verdict_ {
    int rc;
    char msg[1024];
    uint64_t text_bytes;
};

// runtime_load_config's broadcasts: recorded (when record is set); on a
// rank other than the root, deliver[i] is what rank 0 sent in call i.
#define MAX_BCASTS 4
static struct {
    int record;
    int calls;
    struct {
        void *buffer;
        int count, root;
        MPI_Datatype type;
        MPI_Comm comm;
        struct verdict_ verdict; // the first bytes sent, as a verdict
    } call[MAX_BCASTS];
    const void *deliver[MAX_BCASTS];
} bcast_;

static int recording_bcasts_(void) { return bcast_.record; }

static int record_bcast_(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    assert_true(bcast_.calls < MAX_BCASTS);
    const int i = bcast_.calls++;
    bcast_.call[i].buffer = buffer;
    bcast_.call[i].count = count;
    bcast_.call[i].root = root;
    bcast_.call[i].type = datatype;
    bcast_.call[i].comm = comm;
    if (bcast_.deliver[i])
        memcpy(buffer, bcast_.deliver[i], (size_t)count);
    const size_t head = (size_t)count < sizeof(struct verdict_) ? (size_t)count
                                                                : sizeof(struct verdict_);
    memcpy(&bcast_.call[i].verdict, buffer, head);
    return MPI_SUCCESS;
}

int __wrap_MPI_Error_string(int errorcode, char *string, int *resultlen)
{
    *resultlen = snprintf(string, MPI_MAX_ERROR_STRING, "mock MPI error %d", errorcode);
    return MPI_SUCCESS;
}

// The fatal hook runtime_bootstrap installs (abort_hook_) asks these, then
// calls MPI_Abort, which jumps back to assert_ends_job.
int __wrap_MPI_Initialized(int *flag)
{
    *flag = 1;
    return MPI_SUCCESS;
}

int __wrap_MPI_Finalized(int *flag)
{
    *flag = 0;
    return MPI_SUCCESS;
}

static struct {
    int armed; // an assert_ends_job is waiting
    jmp_buf back;
    int calls, code;
    MPI_Comm comm;
} abort_;

int __wrap_MPI_Abort(MPI_Comm comm, int errorcode)
{
    abort_.calls++;
    abort_.comm = comm;
    abort_.code = errorcode;
    if (!abort_.armed)
        fail_msg("the job was ended: %s", log_.fatal);
    abort_.armed = 0;
    longjmp(abort_.back, 1);
}

// Runs `call`, which must end the job as the runtime does: FATAL, the fatal
// hook, MPI_Abort(MPI_COMM_WORLD, 1). Its message is then in log_.fatal.
#define assert_ends_job(call)                                                                      \
    do {                                                                                           \
        abort_.armed = 1;                                                                          \
        if (setjmp(abort_.back) == 0) {                                                            \
            call;                                                                                  \
            abort_.armed = 0;                                                                      \
            fail_msg("%s returned; it should have ended the job", #call);                          \
        }                                                                                          \
        assert_int_equal(abort_.calls, 1);                                                         \
        assert_ptr_equal(abort_.comm, MPI_COMM_WORLD);                                             \
        assert_int_equal(abort_.code, 1);                                                          \
    } while (0)

// ---- the fixture: world rank 4 on host nodeA, with host-mates 5 and 7 ----

#define LOCAL 3

struct fixture {
    struct runtime rt;
    struct runtime_impl im;
    struct board_slot slot[LOCAL]; // the arrival board; slot[0] is this rank's
    struct board_slot *peer[LOCAL];
    int world[LOCAL];
    int polling[LOCAL]; // host-mates inside the current collective, polling it
};

static void beat_polling_peers_(void)
{
    for (int q = 0; fx_ && q < LOCAL; q++)
        if (fx_->polling[q])
            atomic_store(&fx_->slot[q].beat_us, (uint64_t)(clock_.now_s * 1e6));
}

static int setup_(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    const int world[LOCAL] = {4, 5, 7};
    for (int q = 0; q < LOCAL; q++) {
        f->world[q] = world[q];
        f->peer[q] = &f->slot[q];
    }
    f->im.world = MPI_COMM_WORLD;
    f->im.local = MPI_COMM_NULL;
    f->im.local_world = f->world;
    f->im.board = &f->slot[0];
    f->im.peer_board = f->peer;
    f->rt.rank = 4;
    f->rt.size = 8;
    f->rt.local_rank = 0;
    f->rt.local_size = LOCAL;
    f->rt.node_count = 2;
    snprintf(f->rt.host, sizeof f->rt.host, "nodeA");
    f->rt.impl = &f->im;
    f->rt.cfg.comm.timeout_s = 1.0;

    memset(&clock_, 0, sizeof clock_);
    clock_.now_s = 1024.0;
    clock_.step_s = STEP_S;
    for (int q = 0; q < LOCAL; q++) // everyone polled just now
        atomic_store(&f->slot[q].beat_us, (uint64_t)(clock_.now_s * 1e6));
    memset(&test_, 0, sizeof test_);
    test_.done_on_poll = 1;
    memset(&log_, 0, sizeof log_);
    memset(&abort_, 0, sizeof abort_);
    runtime_mpi.stuck = 0;
    memset(&bcast_, 0, sizeof bcast_);
    memset(&peer_, 0, sizeof peer_);
    memset(&last_reduce_, 0, sizeof last_reduce_);
    log_set_identity(f->rt.rank, f->rt.host);
    log_set_fatal_hook(abort_hook_); // as runtime_bootstrap does
    fx_ = f;
    *state = f;
    return 0;
}

static int teardown_(void **state)
{
    log_set_fatal_hook(NULL);
    fx_ = NULL;
    free(*state);
    return 0;
}

static uint64_t entered_(const struct fixture *f, int q)
{
    return atomic_load(&f->slot[q].entered);
}

// A host all-reduce of one int32 (sum) over the job: the barrier and the
// plainest collective of these tests. Returns its status.
static int host_reduce_one_(struct fixture *f)
{
    int32_t one = 1, sum = 0;
    return runtime_host_all_reduce(&f->rt, &one, &sum, 1, COMM_INT32, COMM_SUM);
}

static void expect_reduce_one_(void)
{
    expect_allreduce_(1, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD, MPI_SUCCESS);
}

// The minimum of one int32 over the job, out of place (vgpu_train's
// agreement, job_agree_min). Returns its status.
static int host_min_(struct fixture *f, int32_t v, int32_t *out)
{
    return runtime_host_all_reduce(&f->rt, &v, out, 1, COMM_INT32, COMM_MIN);
}

// ---- each host collective's MPI call ----

static void test_host_all_reduce_min_returns_the_minimum_over_ranks(void **state)
{
    struct fixture *f = *state;
    int32_t out = 0;
    expect_allreduce_(1, MPI_INT32_T, MPI_MIN, MPI_COMM_WORLD, MPI_SUCCESS);
    peer_.value = -3;
    assert_int_equal(host_min_(f, 5, &out), 0);
    assert_int_equal(out, -3);
    assert_ptr_not_equal(last_reduce_.sendbuf, MPI_IN_PLACE); // out of place
    expect_allreduce_(1, MPI_INT32_T, MPI_MIN, MPI_COMM_WORLD, MPI_SUCCESS);
    peer_.value = 2;
    assert_int_equal(host_min_(f, -7, &out), 0);
    assert_int_equal(out, -7);
    assert_int_equal(entered_(f, 0), 2);
}

static void test_host_all_reduce_sums_doubles_in_place_over_ranks(void **state)
{
    struct fixture *f = *state;
    double values[3] = {1.5, -2.0, 0.25};
    const double others[3] = {4.0, 8.0, -0.25}, want[3] = {5.5, 6.0, 0.0};
    peer_.values = others;
    expect_allreduce_(3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_SUCCESS);
    assert_int_equal(runtime_host_all_reduce(&f->rt, values, values, 3, COMM_FLOAT64, COMM_SUM), 0);
    assert_ptr_equal(last_reduce_.sendbuf, MPI_IN_PLACE);
    assert_ptr_equal(last_reduce_.recvbuf, values);
    assert_allclose((double *)values, want, 3, 0, 0);
}

static void test_host_all_reduce_takes_the_maximum_of_doubles_in_place(void **state)
{
    struct fixture *f = *state;
    double values[5] = {1.5, -2.0, 0.25, 7.0, -1.0};
    const double others[5] = {4.0, -8.0, 0.25, 6.0, -0.5}, want[5] = {4.0, -2.0, 0.25, 7.0, -0.5};
    peer_.values = others;
    expect_allreduce_(5, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, MPI_SUCCESS);
    assert_int_equal(runtime_host_all_reduce(&f->rt, values, values, 5, COMM_FLOAT64, COMM_MAX), 0);
    assert_ptr_equal(last_reduce_.sendbuf, MPI_IN_PLACE);
    assert_ptr_equal(last_reduce_.recvbuf, values);
    assert_allclose((double *)values, want, 5, 0, 0);
}

static void test_host_all_gather_gathers_the_same_bytes_from_every_rank(void **state)
{
    struct fixture *f = *state;
    char send[6] = "hello", recv[6 * 8];
    expect_value(__wrap_MPI_Iallgather, sendbuf, send);
    expect_value(__wrap_MPI_Iallgather, sendcount, 6);
    expect_handle_(__wrap_MPI_Iallgather, sendtype, MPI_BYTE);
    expect_value(__wrap_MPI_Iallgather, recvbuf, recv);
    expect_value(__wrap_MPI_Iallgather, recvcount, 6);
    expect_handle_(__wrap_MPI_Iallgather, recvtype, MPI_BYTE);
    expect_handle_(__wrap_MPI_Iallgather, comm, MPI_COMM_WORLD);
    assert_int_equal(runtime_host_all_gather(&f->rt, send, recv, sizeof send), 0);
    assert_int_equal(entered_(f, 0), 1);
}

// The public form refuses it (VGPU_EINVAL); the runtime's own all-gather
// (a program error there) ends the job. Neither reaches MPI.
static void test_all_gather_of_more_than_int_max_bytes_is_refused_before_mpi(void **state)
{
    struct fixture *f = *state;
    // No MPI_Iallgather is expected: a call would fail its check_expected.
    assert_int_equal(runtime_host_all_gather(&f->rt, NEVER_READ, NEVER_READ, (size_t)INT_MAX + 1),
                     VGPU_EINVAL);
    assert_int_equal(abort_.calls, 0);
    assert_ends_job(runtime_ctl_gather(&f->rt, NEVER_READ, NEVER_READ, (size_t)INT_MAX + 1,
                                       MPI_COMM_WORLD, f->rt.size));
    assert_contains(log_.fatal, "2147483648 bytes a rank; at most INT_MAX");
    assert_int_equal(entered_(f, 0), 0);
}

// MPI counts are ints: a broadcast goes in pieces of at most 1 GiB, in order,
// and even 0 bytes is one (empty) broadcast, so every rank enters as many.
static void test_broadcast_goes_in_pieces_of_at_most_1_gib(void **state)
{
    struct fixture *f = *state;
    static const struct {
        size_t bytes;
        int pieces;       // all but the last are 1 GiB
        size_t last_bytes;
    } cases[] = {
        {0, 1, 0},
        {1, 1, 1},
        {GIB - 1, 1, GIB - 1},
        {GIB, 1, GIB},
        {GIB + 1, 2, 1},
        {2 * GIB, 2, GIB},
        {5 * GIB / 2 + 3, 3, GIB / 2 + 3},
    };
    uint64_t entered = 0;
    for (size_t i = 0; i < TEST_ARRAY_LEN(cases); i++) {
        for (int p = 0; p < cases[i].pieces; p++) {
            const size_t len = p + 1 < cases[i].pieces ? GIB : cases[i].last_bytes;
            expect_value(__wrap_MPI_Ibcast, buffer, (char *)NEVER_READ + (size_t)p * GIB);
            expect_value(__wrap_MPI_Ibcast, count, (int)len);
            expect_handle_(__wrap_MPI_Ibcast, datatype, MPI_BYTE);
            expect_value(__wrap_MPI_Ibcast, root, 3);
            expect_handle_(__wrap_MPI_Ibcast, comm, MPI_COMM_WORLD);
        }
        assert_int_equal(runtime_host_broadcast(&f->rt, NEVER_READ, cases[i].bytes, 3), 0);
        entered += (uint64_t)cases[i].pieces;
        assert_int_equal(entered_(f, 0), entered);
    }
}

static void test_host_collective_is_on_the_world_waited_until_done(void **state)
{
    struct fixture *f = *state;
    expect_reduce_one_();
    test_.done_on_poll = 4;
    assert_int_equal(host_reduce_one_(f), 0);
    assert_int_equal(test_.polls, 4);
    assert_int_equal(entered_(f, 0), 1);
}

// The board: one arrival per collective on this rank's slot, and a beat on
// every poll (so host-mates can tell "waiting" from "stopped").
static void test_collectives_mark_arrival_and_beat_while_waiting(void **state)
{
    struct fixture *f = *state;
    expect_reduce_one_();
    test_.done_on_poll = 5;
    assert_int_equal(host_reduce_one_(f), 0);
    assert_int_equal(entered_(f, 0), 1);
    assert_int_equal(atomic_load(&f->slot[0].beat_us), (uint64_t)(test_.clock_at_done_s * 1e6));
    const uint64_t first_beat = atomic_load(&f->slot[0].beat_us);

    int32_t out = 0;
    expect_allreduce_(1, MPI_INT32_T, MPI_MIN, MPI_COMM_WORLD, MPI_SUCCESS);
    test_.done_on_poll = test_.polls + 3;
    assert_int_equal(host_min_(f, 0, &out), 0);
    assert_int_equal(entered_(f, 0), 2);
    assert_int_equal(atomic_load(&f->slot[0].beat_us), (uint64_t)(test_.clock_at_done_s * 1e6));
    assert_true(atomic_load(&f->slot[0].beat_us) > first_beat);
    // Only this rank's own slot is written.
    assert_int_equal(entered_(f, 1), 0);
    assert_int_equal(entered_(f, 2), 0);
}

// ---- the bound: a rank that does not arrive ends the job, named ----

static void test_timeout_names_the_host_mate_that_has_not_arrived(void **state)
{
    struct fixture *f = *state;
    // Rank 5 has not entered this collective; rank 7 is in it, polling.
    atomic_store(&f->slot[2].entered, 1);
    f->polling[2] = 1;
    test_.done_on_poll = 0;
    expect_reduce_one_();
    assert_ends_job(host_reduce_one_(f));
    assert_contains(log_.fatal, "collective timed out after 1.0 s waiting for rank 5 (host nodeA): "
                                "stopped or stuck (control plane: reduction; comm.timeout_s = 1.0)");
    assert_not_contains(log_.fatal, "rank 7");
    assert_not_contains(log_.fatal, "rank 4");
    // Half-way, one warning named it already.
    assert_int_equal(log_.n_warnings, 1);
    assert_contains(log_.warnings, "collective (control plane: reduction) still waiting for rank 5 "
                                   "(host nodeA) after 0.5 s (timeout 1.0 s)");
}

static void test_timeout_lists_every_host_mate_behind(void **state)
{
    struct fixture *f = *state;
    int32_t out = 0;
    test_.done_on_poll = 0;
    expect_allreduce_(1, MPI_INT32_T, MPI_MIN, MPI_COMM_WORLD, MPI_SUCCESS);
    assert_ends_job(host_min_(f, 0, &out));
    assert_contains(log_.fatal, "waiting for rank 5 (host nodeA), rank 7 (host nodeA): stopped or "
                                "stuck (control plane: reduction;");
}

static void test_timeout_names_a_host_mate_stopped_inside_the_collective(void **state)
{
    struct fixture *f = *state;
    // Both entered; rank 5 polls, rank 7 stopped polling 5 s ago.
    atomic_store(&f->slot[1].entered, 1);
    f->polling[1] = 1;
    atomic_store(&f->slot[2].entered, 1);
    atomic_store(&f->slot[2].beat_us, (uint64_t)((clock_.now_s - 5.0) * 1e6));
    test_.done_on_poll = 0;
    expect_value(__wrap_MPI_Ibcast, buffer, NEVER_READ);
    expect_value(__wrap_MPI_Ibcast, count, 16);
    expect_handle_(__wrap_MPI_Ibcast, datatype, MPI_BYTE);
    expect_value(__wrap_MPI_Ibcast, root, 0);
    expect_handle_(__wrap_MPI_Ibcast, comm, MPI_COMM_WORLD);
    assert_ends_job(runtime_host_broadcast(&f->rt, NEVER_READ, 16, 0));
    assert_contains(log_.fatal, "waiting for rank 7 (host nodeA): stopped or stuck (control plane: "
                                "broadcast;");
    assert_not_contains(log_.fatal, "rank 5");
}

static void test_timeout_blames_another_host_when_every_host_mate_is_here(void **state)
{
    struct fixture *f = *state;
    for (int q = 1; q < LOCAL; q++) {
        atomic_store(&f->slot[q].entered, 1);
        f->polling[q] = 1;
    }
    test_.done_on_poll = 0;
    expect_reduce_one_();
    assert_ends_job(host_reduce_one_(f));
    assert_contains(log_.fatal, "waiting for a rank on another host (every rank on nodeA is here)");
}

static void test_timeout_defaults_to_300_s_without_comm_timeout(void **state)
{
    struct fixture *f = *state;
    f->rt.cfg.comm.timeout_s = 0; // not loaded yet
    clock_.step_s = 0.5;          // 600 polls, none long enough to look like a stop
    for (int q = 1; q < LOCAL; q++) {
        atomic_store(&f->slot[q].entered, 1);
        f->polling[q] = 1;
    }
    test_.done_on_poll = 0;
    expect_reduce_one_();
    assert_ends_job(host_reduce_one_(f));
    assert_contains(log_.fatal, "timed out after 300.0 s");
    assert_contains(log_.fatal, "comm.timeout_s = 300.0)");
}

// libvgpu (runtime_join.library): the same wait returns its status, said,
// and marks MPI as stuck: no rank is asked anything again, nothing ends the
// program, and runtime_close leaves MPI alone.
static void test_library_timeout_returns_etimeout_and_stops_asking(void **state)
{
    struct fixture *f = *state;
    f->im.library = 1;
    test_.done_on_poll = 0;
    expect_allreduce_(1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, MPI_SUCCESS);
    assert_int_equal(agree_worst_(&f->rt, 0), VGPU_ETIMEOUT);
    assert_int_equal(abort_.calls, 0);
    assert_string_equal(log_.fatal, "");
    assert_int_equal(log_.n_errors, 1);
    assert_contains(log_.errors, "collective timed out after 1.0 s waiting for rank 5 (host nodeA), "
                                 "rank 7 (host nodeA): stopped or stuck (control plane: agreement;");
    assert_int_equal(runtime_mpi.stuck, 1);
    // No MPI call now (none is expected): the verdict is the failure.
    assert_int_equal(agree_worst_(&f->rt, 0), VGPU_ECOMM);
    assert_int_equal(agree_worst_(&f->rt, VGPU_EDEVMEM), VGPU_EDEVMEM);
    runtime_mpi.stuck = 0;
}

static void test_library_timeout_before_the_config_uses_the_early_bound(void **state)
{
    struct fixture *f = *state;
    f->im.library = 1;
    f->rt.cfg.comm.timeout_s = 0; // not loaded yet
    setenv("VGPU_COMM_TIMEOUT_S", "2.5", 1);
    test_.done_on_poll = 0;
    expect_handle_(__wrap_MPI_Iallgather, sendbuf, NEVER_READ);
    expect_value(__wrap_MPI_Iallgather, sendcount, 8);
    expect_handle_(__wrap_MPI_Iallgather, sendtype, MPI_BYTE);
    expect_value(__wrap_MPI_Iallgather, recvbuf, NEVER_READ);
    expect_value(__wrap_MPI_Iallgather, recvcount, 8);
    expect_handle_(__wrap_MPI_Iallgather, recvtype, MPI_BYTE);
    expect_handle_(__wrap_MPI_Iallgather, comm, MPI_COMM_WORLD);
    assert_int_equal(runtime_ctl_gather(&f->rt, NEVER_READ, NEVER_READ, 8, MPI_COMM_WORLD, 8),
                     VGPU_ETIMEOUT);
    unsetenv("VGPU_COMM_TIMEOUT_S");
    assert_int_equal(abort_.calls, 0);
    assert_contains(log_.errors, "timed out after 2.5 s");
    runtime_mpi.stuck = 0;
}

static void test_library_failed_mpi_call_returns_ecomm_naming_it(void **state)
{
    struct fixture *f = *state;
    f->im.library = 1;
    double values[2] = {1, 2};
    expect_allreduce_(2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, MPI_ERR_COMM);
    assert_int_equal(runtime_host_all_reduce(&f->rt, values, values, 2, COMM_FLOAT64, COMM_MAX),
                     VGPU_ECOMM);
    assert_int_equal(abort_.calls, 0);
    assert_contains(log_.errors, "control plane: MPI_Iallreduce failed in reduction: mock MPI error");
    runtime_mpi.stuck = 0;
}

static void test_mpi_failure_while_waiting_ends_the_job(void **state)
{
    struct fixture *f = *state;
    test_.done_on_poll = 0;
    test_.fail_on_poll = 3;
    expect_allreduce_(1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, MPI_SUCCESS);
    assert_ends_job(agree_worst_(&f->rt, 0)); // runtime_open's agreement
    assert_string_equal(log_.fatal, "control plane: MPI failed in agreement");
    assert_int_equal(test_.polls, 3);
}

static void test_failed_mpi_call_ends_the_job_naming_the_call(void **state)
{
    struct fixture *f = *state;
    double values[2] = {1, 2};
    expect_allreduce_(2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_ERR_COMM);
    assert_ends_job(runtime_host_all_reduce(&f->rt, values, values, 2, COMM_FLOAT64, COMM_SUM));
    char want[96];
    snprintf(want, sizeof want, "control plane: MPI_Iallreduce failed in reduction: mock MPI error %d",
             MPI_ERR_COMM);
    assert_string_equal(log_.fatal, want);
    assert_int_equal(test_.polls, 0); // nothing to wait for
}

// ---- comm_mpi_wait (comm.c) ----

struct hook_calls {
    int polls, halves;
    double last_now_s, half_waited_s;
};

static void on_poll_(void *arg, double now_s)
{
    struct hook_calls *h = arg;
    h->polls++;
    h->last_now_s = now_s;
}

static void on_half_(void *arg, double waited_s)
{
    struct hook_calls *h = arg;
    h->halves++;
    h->half_waited_s = waited_s;
}

static void test_mpi_wait_returns_when_done_calling_on_poll_each_unfinished_poll(void **state)
{
    (void)state;
    MPI_Request req = FAKE_REQUEST;
    struct hook_calls h = {0};
    const struct comm_wait_hooks hooks = {.on_poll = on_poll_, .on_half = on_half_, .arg = &h};
    double waited = -1;
    test_.done_on_poll = 6; // 5 polls find it unfinished
    assert_int_equal(comm_mpi_wait(&req, 10.0, &hooks, &waited), 0);
    assert_int_equal(test_.polls, 6);
    assert_int_equal(h.polls, 5);
    assert_int_equal(h.halves, 0);
    assert_true(h.last_now_s == clock_.now_s); // on_poll gets the time of its poll
    assert_seconds_between(waited, STEP_S, 5 * STEP_S);
    // Done on the first poll: no hook, nothing waited; hooks and waited_s may be NULL.
    test_.done_on_poll = test_.polls + 1;
    assert_int_equal(comm_mpi_wait(&req, 10.0, &hooks, &waited), 0);
    assert_int_equal(h.polls, 5);
    assert_true(waited == 0);
    test_.done_on_poll = test_.polls + 3;
    assert_int_equal(comm_mpi_wait(&req, 10.0, NULL, NULL), 0);
}

static void test_mpi_wait_times_out_at_the_bound_warning_once_at_half(void **state)
{
    (void)state;
    MPI_Request req = FAKE_REQUEST;
    struct hook_calls h = {0};
    const struct comm_wait_hooks hooks = {.on_poll = on_poll_, .on_half = on_half_, .arg = &h};
    double waited = -1;
    test_.done_on_poll = 0;
    assert_int_equal(comm_mpi_wait(&req, 1.0, &hooks, &waited), VGPU_ETIMEOUT);
    assert_int_equal(h.halves, 1);
    assert_seconds_between(h.half_waited_s, 0.5, 0.5 + STEP_S);
    assert_seconds_between(waited, 1.0, 1.0 + STEP_S);
    assert_int_equal(h.polls, test_.polls); // every poll, including the last
}

static void test_mpi_wait_bound_holds_on_the_real_clock(void **state)
{
    (void)state;
    MPI_Request req = FAKE_REQUEST;
    double waited = -1;
    clock_.real = 1;
    test_.done_on_poll = 0;
    const double t0 = __real_util_now_s();
    assert_int_equal(comm_mpi_wait(&req, 0.2, NULL, &waited), VGPU_ETIMEOUT);
    const double elapsed = __real_util_now_s() - t0;
    // Past the bound by at most one poll's nap (generous for a loaded machine).
    assert_seconds_between(waited, 0.2, 1.2);
    assert_seconds_between(elapsed, waited, waited + 1.2);
}

static void test_mpi_wait_returns_ecomm_when_mpi_test_fails(void **state)
{
    (void)state;
    MPI_Request req = FAKE_REQUEST;
    struct hook_calls h = {0};
    const struct comm_wait_hooks hooks = {.on_poll = on_poll_, .on_half = on_half_, .arg = &h};
    test_.done_on_poll = 0;
    test_.fail_on_poll = 3;
    assert_int_equal(comm_mpi_wait(&req, 1.0, &hooks, NULL), VGPU_ECOMM);
    assert_int_equal(test_.polls, 3);
    assert_int_equal(h.polls, 2);
}

static void test_mpi_wait_does_not_count_time_this_process_was_stopped(void **state)
{
    (void)state;
    MPI_Request req = FAKE_REQUEST;
    struct hook_calls h = {0};
    const struct comm_wait_hooks hooks = {.on_poll = on_poll_, .on_half = on_half_, .arg = &h};
    double waited = -1;
    test_.done_on_poll = 0;
    test_.stop_on_poll = 10; // SIGSTOP for 100 s, 0.07 s into a 1 s bound
    test_.stopped_s = 100.0;
    assert_int_equal(comm_mpi_wait(&req, 1.0, &hooks, &waited), VGPU_ETIMEOUT);
    assert_seconds_between(waited, 1.0, 1.0 + STEP_S);
    assert_int_equal(h.halves, 1);
    assert_seconds_between(h.half_waited_s, 0.5, 0.5 + STEP_S);
    assert_true(test_.polls > 100); // it went on polling after the stop
}

// ---- comm_agree (comm.c): all or none ----

static const struct comm_ops agree_ops_ = {.name = "fake"};

static void test_agree_is_all_or_none(void **state)
{
    (void)state;
    comm_t c = {.ops = &agree_ops_, .timeout_s = 1.0};
    static const struct {
        int own, others, want;
    } cases[] = {
        {0, 0, 0},                               // all succeeded
        {VGPU_ENOMEM, 0, VGPU_ENOMEM},           // own failure: own status
        {VGPU_ENOMEM, VGPU_EINVAL, VGPU_ENOMEM}, // own failure, whatever the others had
        {0, VGPU_EINVAL, VGPU_ECOMM},            // another rank failed
    };
    for (size_t i = 0; i < TEST_ARRAY_LEN(cases); i++) {
        expect_allreduce_(1, MPI_INT, MPI_MIN, SUB_COMM, MPI_SUCCESS);
        peer_.value = cases[i].others;
        test_.done_on_poll = test_.polls + 2;
        assert_int_equal(comm_agree(&c, SUB_COMM, cases[i].own, "the step"), cases[i].want);
    }
    assert_int_equal(log_.n_errors, 0);
}

static void test_agree_times_out_when_a_rank_never_arrives(void **state)
{
    (void)state;
    comm_t c = {.ops = &agree_ops_, .timeout_s = 1.0};
    test_.done_on_poll = 0;
    expect_allreduce_(1, MPI_INT, MPI_MIN, SUB_COMM, MPI_SUCCESS);
    assert_int_equal(comm_agree(&c, SUB_COMM, 0, "the checkpoint"), VGPU_ETIMEOUT);
    assert_int_equal(log_.n_warnings, 1);
    assert_contains(log_.warnings, "collective (the checkpoint) still waiting for another rank "
                                   "after 0.5 s (timeout 1.0 s)");
    assert_int_equal(log_.n_errors, 1);
    assert_contains(log_.errors, "collective timed out after 1.0 s in the checkpoint: a rank "
                                 "stopped or died (comm.timeout_s = 1.0)");
    // A rank that failed itself still reports its own status.
    expect_allreduce_(1, MPI_INT, MPI_MIN, SUB_COMM, MPI_SUCCESS);
    assert_int_equal(comm_agree(&c, SUB_COMM, VGPU_ENOMEM, "the checkpoint"), VGPU_ENOMEM);
}

static void test_agree_reports_a_failed_mpi_call_as_ecomm(void **state)
{
    (void)state;
    comm_t c = {.ops = &agree_ops_, .timeout_s = 1.0};
    expect_allreduce_(1, MPI_INT, MPI_MIN, SUB_COMM, MPI_ERR_COMM);
    assert_int_equal(comm_agree(&c, SUB_COMM, 0, "the step"), VGPU_ECOMM);
    char want[96];
    snprintf(want, sizeof want, "fake backend: MPI_Iallreduce failed: mock MPI error %d",
             MPI_ERR_COMM);
    assert_contains(log_.errors, want);
    assert_int_equal(test_.polls, 0);
}

// ---- runtime_load_config: rank 0 decides, everyone gets the verdict ----

// Writes text to a new temporary file named in path (the caller unlinks it).
static void write_temp_(char *path, size_t path_bytes, const char *text)
{
    snprintf(path, path_bytes, "/tmp/vgpu_test_control_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
}

static int setup_config_(void **state)
{
    // The launcher's variables would change what rank 0 decides.
    unsetenv("VGPU_RANKS_PER_DEVICE");
    unsetenv("VGPU_MEMORY_LIMIT");
    unsetenv("VGPU_BACKEND");
    const int rc = setup_(state);
    bcast_.record = 1;
    return rc;
}

static void assert_bcast_from_rank0_(int i, int count)
{
    assert_true(i < bcast_.calls);
    assert_int_equal(bcast_.call[i].count, count);
    assert_ptr_equal(bcast_.call[i].type, MPI_BYTE);
    assert_int_equal(bcast_.call[i].root, 0);
    assert_ptr_equal(bcast_.call[i].comm, MPI_COMM_WORLD);
}

static void test_load_config_rank0_sends_its_verdict_then_the_config(void **state)
{
    struct fixture *f = *state;
    char path[64], err[256] = "untouched";
    const char *text = "[comm]\ntimeout_s = 7.5\n";
    write_temp_(path, sizeof path, text);
    const char *const sets[] = {"train.epochs=3"}; // the program's: skipped
    f->rt.rank = 0;
    const int rc = runtime_load_config(&f->rt, path, sets, 1, err, sizeof err);
    unlink(path);
    assert_int_equal(rc, 0);
    assert_int_equal(bcast_.calls, 3);
    assert_bcast_from_rank0_(0, (int)sizeof(struct verdict_));
    assert_int_equal(bcast_.call[0].verdict.rc, 0);
    assert_string_equal(bcast_.call[0].verdict.msg, "");
    assert_int_equal(bcast_.call[0].verdict.text_bytes, strlen(text) + 1);
    assert_bcast_from_rank0_(1, (int)strlen(text) + 1); // the file's text, read once
    assert_string_equal(f->rt.config_text, text);
    assert_bcast_from_rank0_(2, (int)sizeof f->rt.cfg);
    assert_ptr_equal(bcast_.call[2].buffer, &f->rt.cfg);
    assert_true(f->rt.cfg.comm.timeout_s == 7.5);
    assert_string_equal(err, "untouched");
    free(f->rt.config_text);
}

// A program keeps its own settings in the job's file: a section vgpu does
// not know, and --set of its keys, are the program's (skipped, in the text).
static void test_load_config_leaves_a_programs_own_section_to_it(void **state)
{
    struct fixture *f = *state;
    char path[64], err[256] = "untouched";
    const char *text = "[myapp]\nlearning_rate = fast\n[comm]\ntimeout_s = 9\n";
    write_temp_(path, sizeof path, text);
    const char *const sets[] = {"myapp.steps=ten", "comm.slice_bytes=2M"};
    f->rt.rank = 0;
    const int rc = runtime_load_config(&f->rt, path, sets, 2, err, sizeof err);
    unlink(path);
    assert_int_equal(rc, 0);
    assert_string_equal(err, "untouched");
    assert_true(f->rt.cfg.comm.timeout_s == 9.0);
    assert_int_equal(f->rt.cfg.comm.slice_bytes, 2u << 20);
    assert_string_equal(f->rt.config_text, text);
    free(f->rt.config_text);
    // A key vgpu does not know in a section it owns is still a typo.
    bcast_.calls = 0;
    write_temp_(path, sizeof path, "[comm]\ntimeout = 9\n");
    assert_int_equal(runtime_load_config(&f->rt, path, NULL, 0, err, sizeof err), VGPU_ECONFIG);
    unlink(path);
    assert_contains(err, "unknown key 'timeout' in [comm]");
}

static void test_load_config_rank0_sends_an_error_and_not_the_config(void **state)
{
    struct fixture *f = *state;
    char path[64], err[256] = "", want[96];
    write_temp_(path, sizeof path, "[comm]\ntimeout_s = soon\n");
    f->rt.rank = 0;
    const int rc = runtime_load_config(&f->rt, path, NULL, 0, err, sizeof err);
    unlink(path);
    assert_int_equal(rc, VGPU_ECONFIG);
    assert_int_equal(bcast_.calls, 1); // the verdict only
    assert_bcast_from_rank0_(0, (int)sizeof(struct verdict_));
    assert_int_equal(bcast_.call[0].verdict.rc, VGPU_ECONFIG);
    snprintf(want, sizeof want, "%s:2: ", path);
    assert_contains(bcast_.call[0].verdict.msg, want);
    assert_contains(bcast_.call[0].verdict.msg, "timeout_s");
    assert_string_equal(err, bcast_.call[0].verdict.msg);
}

static void test_load_config_rank0_names_the_sources_of_a_cross_key_conflict(void **state)
{
    struct fixture *f = *state;
    char path[64], err[512] = "", want[256];
    write_temp_(path, sizeof path, "[devices]\nmemory_limit = 1G\n");
    const char *const sets[] = {"devices.memory_fraction=0.5"};
    f->rt.rank = 0;
    const int rc = runtime_load_config(&f->rt, path, sets, 1, err, sizeof err);
    unlink(path);
    assert_int_equal(rc, VGPU_ECONFIG);
    assert_int_equal(bcast_.calls, 1);
    snprintf(want, sizeof want, "%s with --set: devices.memory_limit and devices.memory_fraction "
             "conflict: set one of them", path);
    assert_string_equal(bcast_.call[0].verdict.msg, want);
    assert_string_equal(err, want);
}

static void test_load_config_other_ranks_return_rank0s_error(void **state)
{
    struct fixture *f = *state;
    const struct verdict_ sent = {VGPU_ECONFIG, "a.ini:3: unknown key 'x'", 0};
    bcast_.deliver[0] = &sent;
    char err[256] = "";
    f->rt.rank = 1;
    assert_int_equal(runtime_load_config(&f->rt, "/nonexistent/a.ini", NULL, 0, err, sizeof err),
                     VGPU_ECONFIG);
    assert_string_equal(err, "a.ini:3: unknown key 'x'");
    assert_int_equal(bcast_.calls, 1);
    assert_bcast_from_rank0_(0, (int)sizeof(struct verdict_));
    assert_true(f->rt.cfg.comm.timeout_s == 1.0); // rank 1 read nothing itself
}

static void test_load_config_other_ranks_take_rank0s_config(void **state)
{
    struct fixture *f = *state;
    static const char text[] = "[myapp]\nx = 1\n";
    const struct verdict_ ok = {0, "", sizeof text};
    struct config sent;
    config_defaults(&sent);
    sent.comm.timeout_s = 42.0;
    bcast_.deliver[0] = &ok;
    bcast_.deliver[1] = text;
    bcast_.deliver[2] = &sent;
    char err[256] = "untouched";
    f->rt.rank = 1;
    assert_int_equal(runtime_load_config(&f->rt, NULL, NULL, 0, err, sizeof err), 0);
    assert_int_equal(bcast_.calls, 3);
    assert_bcast_from_rank0_(1, (int)sizeof text);
    assert_string_equal(f->rt.config_text, text);
    assert_bcast_from_rank0_(2, (int)sizeof f->rt.cfg);
    assert_ptr_equal(bcast_.call[2].buffer, &f->rt.cfg);
    assert_memory_equal(&f->rt.cfg, &sent, sizeof sent);
    assert_string_equal(err, "untouched");
    free(f->rt.config_text);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup_, teardown_)
#define T_CONFIG(name) cmocka_unit_test_setup_teardown(name, setup_config_, teardown_)

int main(void)
{
    log_set_trace(0);
    const struct CMUnitTest tests[] = {
        T(test_host_all_reduce_min_returns_the_minimum_over_ranks),
        T(test_host_all_reduce_sums_doubles_in_place_over_ranks),
        T(test_host_all_reduce_takes_the_maximum_of_doubles_in_place),
        T(test_host_all_gather_gathers_the_same_bytes_from_every_rank),
        T(test_all_gather_of_more_than_int_max_bytes_is_refused_before_mpi),
        T(test_broadcast_goes_in_pieces_of_at_most_1_gib),
        T(test_host_collective_is_on_the_world_waited_until_done),
        T(test_collectives_mark_arrival_and_beat_while_waiting),
        T(test_timeout_names_the_host_mate_that_has_not_arrived),
        T(test_timeout_lists_every_host_mate_behind),
        T(test_timeout_names_a_host_mate_stopped_inside_the_collective),
        T(test_timeout_blames_another_host_when_every_host_mate_is_here),
        T(test_timeout_defaults_to_300_s_without_comm_timeout),
        T(test_library_timeout_returns_etimeout_and_stops_asking),
        T(test_library_timeout_before_the_config_uses_the_early_bound),
        T(test_library_failed_mpi_call_returns_ecomm_naming_it),
        T(test_mpi_failure_while_waiting_ends_the_job),
        T(test_failed_mpi_call_ends_the_job_naming_the_call),
        T(test_mpi_wait_returns_when_done_calling_on_poll_each_unfinished_poll),
        T(test_mpi_wait_times_out_at_the_bound_warning_once_at_half),
        T(test_mpi_wait_bound_holds_on_the_real_clock),
        T(test_mpi_wait_returns_ecomm_when_mpi_test_fails),
        T(test_mpi_wait_does_not_count_time_this_process_was_stopped),
        T(test_agree_is_all_or_none),
        T(test_agree_times_out_when_a_rank_never_arrives),
        T(test_agree_reports_a_failed_mpi_call_as_ecomm),
        T_CONFIG(test_load_config_rank0_sends_its_verdict_then_the_config),
        T_CONFIG(test_load_config_rank0_sends_an_error_and_not_the_config),
        T_CONFIG(test_load_config_leaves_a_programs_own_section_to_it),
        T_CONFIG(test_load_config_rank0_names_the_sources_of_a_cross_key_conflict),
        T_CONFIG(test_load_config_other_ranks_return_rank0s_error),
        T_CONFIG(test_load_config_other_ranks_take_rank0s_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
