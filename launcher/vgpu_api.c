// vgpu_api.c: libvgpu's public functions (vgpu/vgpu.h) on the runtime, the
// device and the communicator. Argument checks here; the work below.
#include <vgpu/vgpu.h>

#include <stdlib.h>

#include "comm.h"
#include "device_internal.h"
#include "log.h"
#include "runtime.h"
#include "status.h"

#ifndef VGPU_VERSION
#define VGPU_VERSION "unknown"
#endif

// The public enums are comm.h's, number for number.
_Static_assert((int)vgpu_float32 == (int)COMM_FLOAT32 && (int)vgpu_float64 == (int)COMM_FLOAT64 &&
                   (int)vgpu_int32 == (int)COMM_INT32 && (int)vgpu_int64 == (int)COMM_INT64 &&
                   (int)vgpu_float16 == (int)COMM_FLOAT16 &&
                   (int)vgpu_bfloat16 == (int)COMM_BFLOAT16,
               "vgpu_datatype_t is enum comm_dtype");
_Static_assert((int)vgpu_sum == (int)COMM_SUM && (int)vgpu_avg == (int)COMM_AVG &&
                   (int)vgpu_prod == (int)COMM_PROD && (int)vgpu_min == (int)COMM_MIN &&
                   (int)vgpu_max == (int)COMM_MAX,
               "vgpu_op_t is enum comm_reduce_op");

struct vgpu {
    struct runtime rt;
};

// The runtime is one per process (MPI, the log's identity, the flight
// recorder): so is a live handle.
static int live_;

const char *vgpu_version(void) { return VGPU_VERSION; }

const char *vgpu_status_string(int status) { return status_str(status); }

int vgpu_init(vgpu_t **out, int *argc, char ***argv, const struct vgpu_options *options)
{
    static const struct vgpu_options defaults;
    const struct vgpu_options *o = options ? options : &defaults;
    if (!out || o->n_overrides < 0 || (o->n_overrides && !o->overrides))
        return VGPU_EINVAL;
    *out = NULL;
    if (live_) {
        log_error("vgpu_init: this process is a rank already (one vgpu_init per process)");
        return VGPU_EINVAL;
    }
    vgpu_t *v = calloc(1, sizeof *v);
    if (!v)
        return VGPU_ENOMEM;
    struct runtime *rt = &v->rt;
    const struct runtime_join join = {.mpi_comm = o->mpi_comm, .library = 1};
    int rc = runtime_bootstrap(rt, argc, argv, &join);
    if (rc < 0) {
        runtime_close(rt, 1);
        free(v);
        return rc;
    }
    char err[512] = "";
    rc = runtime_load_config(rt, o->config_path, o->overrides, o->n_overrides, err, sizeof err);
    if (rc < 0 && rt->rank == 0)
        log_error("%s", err);
    if (rc == 0) {
        const struct runtime_open_args args = {.quiet = o->quiet,
                                               .largest_collective_bytes =
                                                   o->largest_collective_bytes};
        rc = runtime_open(rt, &args);
    }
    if (rc < 0) {
        runtime_close(rt, 1);
        free(v);
        return rc;
    }
    runtime_started(rt); // the program's own start-up is its business
    live_ = 1;
    *out = v;
    return 0;
}

int vgpu_finalize(vgpu_t *v)
{
    if (!v)
        return VGPU_EINVAL;
    runtime_close(&v->rt, 0);
    free(v);
    live_ = 0;
    return 0;
}

int vgpu_rank(const vgpu_t *v) { return v ? v->rt.rank : VGPU_EINVAL; }
int vgpu_size(const vgpu_t *v) { return v ? v->rt.size : VGPU_EINVAL; }
int vgpu_local_rank(const vgpu_t *v) { return v ? v->rt.local_rank : VGPU_EINVAL; }
int vgpu_local_size(const vgpu_t *v) { return v ? v->rt.local_size : VGPU_EINVAL; }
const char *vgpu_device_kind(const vgpu_t *v) { return v ? device_kind(&v->rt.dev) : "none"; }
const char *vgpu_backend(const vgpu_t *v) { return v ? comm_backend_name(v->rt.comm) : "none"; }

// ---- device memory ----

int vgpu_malloc(vgpu_t *v, void **ptr, size_t bytes)
{
    return v && ptr ? device_alloc(&v->rt.dev, bytes, ptr) : VGPU_EINVAL;
}

int vgpu_free(vgpu_t *v, void *ptr) { return v ? device_free(&v->rt.dev, ptr) : VGPU_EINVAL; }

int vgpu_memcpy_htod(vgpu_t *v, void *device_dst, const void *host_src, size_t bytes)
{
    return v ? device_copy_to_device(&v->rt.dev, device_dst, host_src, bytes) : VGPU_EINVAL;
}

int vgpu_memcpy_dtoh(vgpu_t *v, void *host_dst, const void *device_src, size_t bytes)
{
    return v ? device_copy_to_host(&v->rt.dev, host_dst, device_src, bytes) : VGPU_EINVAL;
}

int vgpu_memcpy_dtod(vgpu_t *v, void *device_dst, const void *device_src, size_t bytes)
{
    return v ? device_copy(&v->rt.dev, device_dst, device_src, bytes) : VGPU_EINVAL;
}

int vgpu_synchronize(vgpu_t *v) { return v ? device_sync(&v->rt.dev) : VGPU_EINVAL; }

void *vgpu_stream(vgpu_t *v)
{
#ifdef VGPU_HAVE_CUDA
    return v && device_is_cuda(&v->rt.dev) ? device_cuda_stream(&v->rt.dev) : NULL;
#else
    (void)v;
    return NULL;
#endif
}

int vgpu_memory(const vgpu_t *v, size_t *in_use, size_t *peak, size_t *cap)
{
    if (!v)
        return VGPU_EINVAL;
    const struct arena_stats s = arena_get_stats(&v->rt.dev.arena);
    if (in_use)
        *in_use = (size_t)s.in_use_bytes;
    if (peak)
        *peak = (size_t)s.peak_bytes;
    if (cap)
        *cap = (size_t)s.cap_bytes;
    return 0;
}

// ---- collectives ----

// Bytes of count elements of type t, or 0 with *ok = 0 when t is not a type
// or the size overflows.
static size_t bytes_of_(size_t count, vgpu_datatype_t t, int *ok)
{
    const size_t es = comm_dtype_size((enum comm_dtype)t);
    *ok = es && count <= SIZE_MAX / es;
    return *ok ? count * es : 0;
}

int vgpu_all_reduce(const void *sendbuff, void *recvbuff, size_t count, vgpu_datatype_t datatype,
                    vgpu_op_t op, vgpu_t *v)
{
    if (!v)
        return VGPU_EINVAL;
    return comm_all_reduce_typed(v->rt.comm, sendbuff, recvbuff, count, (enum comm_dtype)datatype,
                                 (enum comm_reduce_op)op);
}

int vgpu_broadcast(const void *sendbuff, void *recvbuff, size_t count, vgpu_datatype_t datatype,
                   int root, vgpu_t *v)
{
    int ok;
    const size_t bytes = bytes_of_(count, datatype, &ok);
    if (!v || !ok || root < 0 || root >= v->rt.size)
        return VGPU_EINVAL;
    // In place on recvbuff (comm.h): the root's data goes there first.
    if (v->rt.rank == root && sendbuff != recvbuff && bytes) {
        int rc = device_copy(&v->rt.dev, recvbuff, sendbuff, bytes);
        if (rc < 0)
            return rc;
    }
    return comm_broadcast(v->rt.comm, recvbuff, bytes, root);
}

int vgpu_all_gather(const void *sendbuff, void *recvbuff, size_t sendcount,
                    vgpu_datatype_t datatype, vgpu_t *v)
{
    int ok;
    const size_t bytes = bytes_of_(sendcount, datatype, &ok);
    if (!v || !ok)
        return VGPU_EINVAL;
    return comm_all_gather(v->rt.comm, sendbuff, recvbuff, bytes);
}

int vgpu_reduce_scatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                        vgpu_datatype_t datatype, vgpu_op_t op, vgpu_t *v)
{
    if (!v)
        return VGPU_EINVAL;
    return comm_reduce_scatter(v->rt.comm, sendbuff, recvbuff, recvcount,
                               (enum comm_dtype)datatype, (enum comm_reduce_op)op);
}

int vgpu_barrier(vgpu_t *v) { return v ? comm_barrier(v->rt.comm) : VGPU_EINVAL; }
