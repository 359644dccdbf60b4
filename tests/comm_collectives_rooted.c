// comm_collectives_rooted.c: part of test_comm_collectives.c, which
// includes it after its helpers (CHECK, CALL, typed_value_, typed_right_,
// issued_, total_, byte_, partial_value_): the calls that not every rank
// uses alike, reduce to a root and point-to-point send/recv, with exact
// expected values, and the fault modes (a rank that never arrives at a
// collective, a peer that never sends).

// comm_reduce: root gets the reduction (typed_right_'s value); the others'
// recv is untouched (NULL when `null_elsewhere`), and send everywhere but
// in place on root.
static void test_reduce_(comm_t *c, device_t *dev, size_t count, enum comm_dtype t,
                         enum comm_reduce_op op, int root, int in_place)
{
    const size_t es = comm_dtype_size(t), bytes = count * es;
    const int is_root = rank_ == root, null_elsewhere = in_place;
    unsigned char *host = malloc(bytes + 8);
    void *dsend = NULL, *drecv = NULL;
    CALL(device_alloc(dev, bytes + 8, &dsend));
    CALL(device_alloc(dev, bytes + 8, &drecv));
    memset(host, 0xa5, bytes + 8); // the marker recv keeps off root
    CALL(device_copy_to_device(dev, drecv, host, bytes));
    for (size_t i = 0; i < count; i++)
        comm_host_put(host, i, t, typed_value_(rank_, i, t, op));
    CALL(device_copy_to_device(dev, dsend, host, bytes));
    void *out = is_root ? (in_place ? dsend : drecv) : null_elsewhere ? NULL : drecv;
    CALL(comm_reduce(c, dsend, out, count, t, op, root));
    issued_(bytes);
    long long wrong = 0;
    double got;
    if (is_root) {
        CALL(device_copy_to_host(dev, host, out, bytes));
        for (size_t i = 0; i < count; i++)
            wrong += !typed_right_(host, i, t, op, &got);
    } else if (!null_elsewhere) {
        CALL(device_copy_to_host(dev, host, drecv, bytes));
        for (size_t i = 0; i < bytes; i++)
            wrong += host[i] != 0xa5;
    }
    if (!(is_root && in_place)) { // the input must be untouched
        char *want = malloc(bytes + 8);
        for (size_t i = 0; i < count; i++)
            comm_host_put(want, i, t, typed_value_(rank_, i, t, op));
        CALL(device_copy_to_host(dev, host, dsend, bytes));
        for (size_t i = 0; i < bytes; i++)
            wrong += host[i] != (unsigned char)want[i];
        free(want);
    }
    long long all = total_(wrong);
    CHECK(all == 0, "reduce %s %s count %zu root %d %s: %lld wrong elements or bytes over all ranks",
          comm_dtype_name(t), comm_op_name(op), count, root, in_place ? "in-place" : "out-of-place",
          all);
    device_free(dev, dsend);
    device_free(dev, drecv);
    free(host);
}

// The ring's reduce is its all-reduce: on values whose sums round, a reduce
// and a broadcast from root give the all-reduce's bits.
static void test_reduce_bits_(comm_t *c, device_t *dev, size_t count, enum comm_reduce_op op)
{
    const size_t bytes = count * sizeof(float);
    float *host = malloc(bytes + 4), *want = malloc(bytes + 4);
    float *dsend = NULL, *dall = NULL;
    CALL(device_alloc(dev, bytes + 4, (void **)&dsend));
    CALL(device_alloc(dev, bytes + 4, (void **)&dall));
    for (size_t i = 0; i < count; i++)
        host[i] = partial_value_(rank_, i);
    CALL(device_copy_to_device(dev, dsend, host, bytes));
    CALL(comm_all_reduce(c, dsend, dall, count, op));
    CALL(device_copy_to_host(dev, want, dall, bytes));
    const int root = size_ - 1;
    CALL(comm_reduce(c, dsend, rank_ == root ? dall : NULL, count, COMM_FLOAT32, op, root));
    CALL(comm_broadcast(c, dall, bytes, root));
    issued_(bytes);
    issued_(bytes);
    issued_(bytes);
    CALL(device_copy_to_host(dev, host, dall, bytes));
    const long long wrong = total_(memcmp(host, want, bytes) != 0);
    CHECK(wrong == 0, "reduce + broadcast %s count %zu: not the all-reduce's bits on %lld ranks",
          comm_op_name(op), count, wrong);
    device_free(dev, dsend);
    device_free(dev, dall);
    free(host);
    free(want);
}

// Every type and operation, a few counts, every root, in place and not (the
// large count alternates between the two).
static void test_reduces_(comm_t *c, device_t *dev)
{
    const size_t counts[] = {0, 1, 7, 300007};
    const size_t ncounts = sizeof counts / sizeof counts[0];
    for (int t = 0; t < COMM_DTYPE_COUNT; t++)
        for (int op = 0; op < COMM_OP_COUNT; op++)
            for (size_t k = 0; k < ncounts; k++)
                for (int root = 0; root < size_; root++)
                    for (int in_place = 0; in_place < 2; in_place++)
                        if (k + 1 < ncounts || in_place == (t + op + root) % 2)
                            test_reduce_(c, dev, counts[k], (enum comm_dtype)t,
                                         (enum comm_reduce_op)op, root, in_place);
    if (!strcmp(comm_backend_name(c), "ring")) {
        test_reduce_bits_(c, dev, 100003, COMM_SUM);
        test_reduce_bits_(c, dev, 1000, COMM_AVG);
    }
}

// A ring of messages: rank r sends `bytes` to r + 1 and receives from
// r - 1 (even ranks send first, odd ones receive first, so that every send
// finds its receive), then a second message the other way round; the
// content is checked exactly.
static void test_send_recv_(comm_t *c, device_t *dev, size_t bytes)
{
    const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
    unsigned char *host = malloc(bytes + 1);
    void *dsend = NULL, *drecv = NULL;
    CALL(device_alloc(dev, bytes + 1, &dsend));
    CALL(device_alloc(dev, bytes + 1, &drecv));
    long long wrong = 0;
    for (int dir = 0; dir < 2; dir++) {
        const int to = dir ? left : right, from = dir ? right : left;
        for (size_t i = 0; i < bytes; i++)
            host[i] = byte_(rank_ + 7 * dir, i);
        CALL(device_copy_to_device(dev, dsend, host, bytes));
        memset(host, 0xee, bytes);
        CALL(device_copy_to_device(dev, drecv, host, bytes));
        if (rank_ % 2 == 0) {
            CALL(comm_send(c, dsend, bytes, to));
            CALL(comm_recv(c, drecv, bytes, from));
        } else {
            CALL(comm_recv(c, drecv, bytes, from));
            CALL(comm_send(c, dsend, bytes, to));
        }
        issued_(bytes);
        issued_(bytes);
        CALL(device_copy_to_host(dev, host, drecv, bytes));
        for (size_t i = 0; i < bytes; i++)
            wrong += host[i] != byte_(from + 7 * dir, i);
    }
    long long all = total_(wrong);
    CHECK(all == 0, "send/recv %zu bytes around the ring: %lld wrong bytes", bytes, all);
    device_free(dev, dsend);
    device_free(dev, drecv);
    free(host);
}

// Peers that are not another rank, and host memory, are refused (and not
// counted).
static void test_bad_peers_(comm_t *c, device_t *dev)
{
    void *d = NULL;
    CALL(device_alloc(dev, 64, &d));
    char on_host[64];
    CHECK(comm_send(c, d, 64, rank_) == VGPU_EINVAL, "a send to this rank was not refused");
    CHECK(comm_recv(c, d, 64, rank_) == VGPU_EINVAL, "a recv from this rank was not refused");
    CHECK(comm_send(c, d, 64, -1) == VGPU_EINVAL, "a send to rank -1 was not refused");
    CHECK(comm_recv(c, d, 64, size_) == VGPU_EINVAL, "a recv from rank %d was not refused", size_);
    if (size_ > 1)
        CHECK(comm_send(c, on_host, sizeof on_host, (rank_ + 1) % size_) == VGPU_EINVAL,
              "a send from host memory was not refused");
    CHECK(comm_reduce(c, d, d, 1, COMM_FLOAT32, COMM_SUM, size_) == VGPU_EINVAL,
          "a reduce to root %d was not refused", size_);
    device_free(dev, d);
}

static void test_rooted_(comm_t *c, device_t *dev)
{
    test_reduces_(c, dev);
    test_bad_peers_(c, dev);
    if (size_ < 2)
        return;
    // Empty, one byte, odd, and more than one piece of mpi_p2p.c (4 MiB).
    const size_t sizes[] = {0, 1, 4099, (9u << 20) + 5};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        test_send_recv_(c, dev, sizes[k]);
}

// ---- fault modes: the job then ends ----

// --sleep-rank R: rank R never enters the collective, the others must fail
// with VGPU_ETIMEOUT (the test then aborts the job, as the runtime would).
static void never_arrives_(comm_t *c, device_t *dev, int sleep_rank)
{
    float *d = NULL;
    CALL(device_alloc_floats(dev, 1024, &d));
    if (rank_ == sleep_rank)
        sleep(3600);
    double t0 = util_now_s();
    int rc = comm_all_reduce(c, d, d, 1024, COMM_SUM);
    double took = util_now_s() - t0;
    fprintf(stderr, "[rank %d] comm_all_reduce -> %s after %.1f s\n", rank_, status_str(rc), took);
    MPI_Abort(MPI_COMM_WORLD, rc == VGPU_ETIMEOUT ? 3 : 4);
}

// --recv-never: rank 0 receives from rank 1, which never sends; the receive
// must end in VGPU_ETIMEOUT within 1.5 times the timeout, and fail the
// communicator. The job then ends normally (the receive was cancelled).
static void never_sends_(comm_t *c, device_t *dev, double timeout_s)
{
    void *d = NULL;
    CALL(device_alloc(dev, 4096, &d));
    if (rank_ == 0 && size_ > 1) {
        const double t0 = util_now_s();
        const int rc = comm_recv(c, d, 4096, 1);
        const double took = util_now_s() - t0;
        CHECK(rc == VGPU_ETIMEOUT, "a recv from a rank that never sends -> %s", status_str(rc));
        CHECK(took >= 0.9 * timeout_s && took <= 1.5 * timeout_s,
              "the recv ended after %.2f s, timeout %.2f s", took, timeout_s);
        CHECK(comm_failed(c), "the communicator is not failed after the timeout");
        printf("test_comm_collectives: recv from a rank that never sends -> %s after %.2f s "
               "(timeout %.2f s)\n", status_str(rc), took, timeout_s);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    device_free(dev, d);
}
