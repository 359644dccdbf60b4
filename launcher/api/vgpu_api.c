// vgpu_api.c: libvgpu's core (vgpu/vgpu.h) on the runtime, the device and
// the communicator. Argument checks here; the work below. vgpu_train's
// math is the math module's (trainer/vgpu/vgpu_math.h).
#include <vgpu/vgpu.h>

#include <stdio.h>
#include <stdlib.h>

#include "flight.h"
#include "log.h"
#include "status.h"
#include "trace.h"
#include "vgpu_internal.h"

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

// The runtime is one per process (MPI, the log's identity, the flight
// recorder): so is a live handle.
static int live_;

const char *vgpu_version(void) { return VGPU_VERSION; }

const char *vgpu_status_string(int status) { return status_str(status); }

int vgpu_join(vgpu_t **out, int *argc, char ***argv, const struct vgpu_options *options)
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
    v->options = *o;
    struct runtime *rt = &v->rt;
    const struct runtime_join join = {.mpi_comm = o->mpi_comm, .library = !o->end_job_on_failure};
    int rc = runtime_bootstrap(rt, argc, argv, &join);
    char err[1024] = "";
    // A configuration's error is the job's, not a rank's: said once, untagged.
    if (rc == 0 &&
        (rc = runtime_load_config(rt, o->config_path, o->overrides, o->n_overrides, err,
                                  sizeof err)) < 0 &&
        rt->rank == 0 && err[0])
        fprintf(stderr, "vgpu: %s\n", err);
    if (rc < 0) {
        runtime_close(rt, 1);
        free(v);
        return rc;
    }
    live_ = 1;
    *out = v;
    return 0;
}

int vgpu_open(vgpu_t *v, const struct vgpu_open_options *options)
{
    static const struct vgpu_open_options defaults;
    const struct vgpu_open_options *o = options ? options : &defaults;
    if (!v || v->open_tried)
        return VGPU_EINVAL;
    v->open_tried = 1;
    const struct runtime_open_args args = {
        .min_bytes = o->min_device_bytes,
        .largest_collective_bytes = o->largest_collective_bytes
                                        ? o->largest_collective_bytes
                                        : v->options.largest_collective_bytes,
        .quiet = o->quiet || v->options.quiet,
        .one_blas_thread = o->deterministic,
        .tree_all_reduce = o->deterministic,
        .plan_only = o->plan_only,
    };
    const int rc = runtime_open(&v->rt, &args);
    v->opened = rc == 0;
    return rc;
}

int vgpu_is_planned(const vgpu_t *v) { return v ? v->rt.planned : 0; }

int vgpu_init(vgpu_t **out, int *argc, char ***argv, const struct vgpu_options *options)
{
    int rc = vgpu_join(out, argc, argv, options);
    if (rc < 0)
        return rc;
    if ((rc = vgpu_open(*out, NULL)) == 0 && vgpu_is_planned(*out))
        rc = VGPU_EPLANNED; // a plan opens nothing the program could use
    if (rc == 0)
        rc = vgpu_startup_done(*out);
    if (rc < 0) {
        vgpu_finalize(*out);
        *out = NULL;
    }
    return rc;
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

int vgpu_startup_stage(vgpu_t *v, const char *what)
{
    if (!v || !what)
        return VGPU_EINVAL;
    runtime_stage_named(&v->rt, what);
    return 0;
}

int vgpu_startup_done(vgpu_t *v)
{
    if (!v)
        return VGPU_EINVAL;
    runtime_started(&v->rt);
    return 0;
}

int vgpu_rank(const vgpu_t *v) { return v ? v->rt.rank : VGPU_EINVAL; }
int vgpu_size(const vgpu_t *v) { return v ? v->rt.size : VGPU_EINVAL; }
int vgpu_local_rank(const vgpu_t *v) { return v ? v->rt.local_rank : VGPU_EINVAL; }
int vgpu_local_size(const vgpu_t *v) { return v ? v->rt.local_size : VGPU_EINVAL; }
const char *vgpu_host_name(const vgpu_t *v) { return v ? v->rt.host : ""; }
int vgpu_host_count(const vgpu_t *v) { return v ? v->rt.node_count : VGPU_EINVAL; }
int vgpu_physical_device_count(const vgpu_t *v) { return v ? v->rt.physical_devices : VGPU_EINVAL; }
int vgpu_is_simulated(const vgpu_t *v) { return v ? v->rt.simulated : 0; }
const char *vgpu_config_text(const vgpu_t *v) { return v ? v->rt.config_text : NULL; }
int vgpu_launcher_rank(void) { return runtime_launcher_rank(); }

const char *vgpu_device_kind(const vgpu_t *v)
{
    device_t *d = api_device((vgpu_t *)v);
    return d ? device_kind(d) : "none";
}

int vgpu_cuda_device(const vgpu_t *v)
{
    device_t *d = api_device((vgpu_t *)v);
    return d && device_caps(d) & DEVICE_CAP_CUDA ? d->info.index : -1;
}

const char *vgpu_backend(const vgpu_t *v)
{
    comm_t *c = api_comm((vgpu_t *)v);
    return c ? comm_backend_name(c) : "none";
}

// ---- device memory ----

// The program's copies and waits, counted for the timeline (trace.h's device
// operations) as the math entries are: trace_op_begin before the call,
// counted_ with its result. The collectives' own copies go to the device
// directly and are not counted (their time is the communication's).
static int counted_(uint64_t start_ns, enum trace_op kind, size_t bytes, int rc)
{
    trace_op_end(kind, start_ns, 0, bytes);
    return rc;
}

int vgpu_malloc(vgpu_t *v, void **ptr, size_t bytes)
{
    device_t *d = api_device(v);
    return d && ptr ? device_alloc(d, bytes, ptr) : VGPU_EINVAL;
}

int vgpu_free(vgpu_t *v, void *ptr)
{
    device_t *d = api_device(v);
    return d ? device_free(d, ptr) : VGPU_EINVAL;
}

int vgpu_memcpy_htod(vgpu_t *v, void *device_dst, const void *host_src, size_t bytes)
{
    device_t *d = api_device(v);
    if (!d)
        return VGPU_EINVAL;
    const uint64_t t0 = trace_op_begin();
    return counted_(t0, TRACE_OP_COPY_HOST, bytes,
                    device_copy_to_device(d, device_dst, host_src, bytes));
}

int vgpu_memcpy_dtoh(vgpu_t *v, void *host_dst, const void *device_src, size_t bytes)
{
    device_t *d = api_device(v);
    if (!d)
        return VGPU_EINVAL;
    const uint64_t t0 = trace_op_begin();
    int status = device_copy_to_host(d, host_dst, device_src, bytes);
    if (status == 0) // the stream is synchronised: see vgpu_synchronize
        status = comm_async_error(api_comm(v));
    return counted_(t0, TRACE_OP_COPY_HOST, bytes, status);
}

int vgpu_memcpy_dtod(vgpu_t *v, void *device_dst, const void *device_src, size_t bytes)
{
    device_t *d = api_device(v);
    if (!d)
        return VGPU_EINVAL;
    const uint64_t t0 = trace_op_begin();
    return counted_(t0, TRACE_OP_COPY_DEVICE, bytes,
                    device_copy(d, device_dst, device_src, bytes));
}

int vgpu_synchronize(vgpu_t *v)
{
    device_t *d = api_device(v);
    if (!d)
        return VGPU_EINVAL;
    const uint64_t t0 = trace_op_begin();
    int status = device_sync(d);
    // Collectives queued on the stream (the device collectives) are done
    // now: what they met is this call's to say.
    if (status == 0)
        status = comm_async_error(api_comm(v));
    return counted_(t0, TRACE_OP_SYNC, 0, status);
}

void *vgpu_stream(vgpu_t *v)
{
    device_t *d = api_device(v);
    return d ? device_stream(d) : NULL;
}

int vgpu_memory(const vgpu_t *v, size_t *in_use, size_t *peak, size_t *cap)
{
    device_t *d = api_device((vgpu_t *)v);
    if (!d)
        return VGPU_EINVAL;
    const struct arena_stats s = arena_get_stats(&d->arena);
    if (in_use)
        *in_use = (size_t)s.in_use_bytes;
    if (peak)
        *peak = (size_t)s.peak_bytes;
    if (cap)
        *cap = (size_t)s.cap_bytes;
    return 0;
}

int vgpu_memzero(vgpu_t *v, void *device_ptr, size_t bytes)
{
    device_t *d = api_device(v);
    if (!d)
        return VGPU_EINVAL;
    const uint64_t t0 = trace_op_begin();
    return counted_(t0, TRACE_OP_COPY_DEVICE, bytes,
                    device_zero(d, device_ptr, bytes));
}

int vgpu_memcpy_htod_async(vgpu_t *v, void *device_dst, const void *host_src, size_t bytes)
{
    device_t *d = api_device(v);
    if (!d)
        return VGPU_EINVAL;
    const uint64_t t0 = trace_op_begin();
    return counted_(t0, TRACE_OP_COPY_HOST, bytes,
                    device_copy_to_device_async(d, device_dst, host_src, bytes));
}

int vgpu_wait_host_reads(vgpu_t *v)
{
    device_t *d = api_device(v);
    if (!d)
        return VGPU_EINVAL;
    if (!d->host_reads_pending) // nothing to wait for: no wait
        return 0;
    const uint64_t t0 = trace_op_begin();
    return counted_(t0, TRACE_OP_SYNC, 0, device_wait_host_reads(d));
}

int vgpu_host_register(vgpu_t *v, void *host_ptr, size_t bytes)
{
    device_t *d = api_device(v);
    return d ? device_pin_host(d, host_ptr, bytes) : VGPU_EINVAL;
}

void vgpu_host_unregister(vgpu_t *v, void *host_ptr)
{
    device_t *d = api_device(v);
    if (d)
        device_unpin_host(d, host_ptr);
}

_Static_assert(VGPU_MALLOC_ALIGN == ARENA_ALIGN, "vgpu_malloc's alignment is the arena's");

int vgpu_launch_host_func(vgpu_t *v, void (*fn)(void *arg), void *arg)
{
    device_t *d = api_device(v);
    return d && fn ? device_host_func(d, fn, arg) : VGPU_EINVAL;
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
    comm_t *c = api_collective(v);
    if (!c)
        return VGPU_EINVAL;
    return comm_all_reduce_typed(c, sendbuff, recvbuff, count, (enum comm_dtype)datatype,
                                 (enum comm_reduce_op)op);
}

int vgpu_broadcast(const void *sendbuff, void *recvbuff, size_t count, vgpu_datatype_t datatype,
                   int root, vgpu_t *v)
{
    int ok;
    const size_t bytes = bytes_of_(count, datatype, &ok);
    comm_t *c = api_collective(v);
    if (!c || !ok || root < 0 || root >= v->rt.size)
        return VGPU_EINVAL;
    // In place on recvbuff (comm.h): the root's data goes there first.
    if (v->rt.rank == root && sendbuff != recvbuff && bytes) {
        int rc = device_copy(&v->rt.dev, recvbuff, sendbuff, bytes);
        if (rc < 0)
            return rc;
    }
    return comm_broadcast(c, recvbuff, bytes, root);
}

int vgpu_all_gather(const void *sendbuff, void *recvbuff, size_t sendcount,
                    vgpu_datatype_t datatype, vgpu_t *v)
{
    int ok;
    const size_t bytes = bytes_of_(sendcount, datatype, &ok);
    comm_t *c = api_collective(v);
    if (!c || !ok)
        return VGPU_EINVAL;
    return comm_all_gather(c, sendbuff, recvbuff, bytes);
}

int vgpu_reduce_scatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                        vgpu_datatype_t datatype, vgpu_op_t op, vgpu_t *v)
{
    comm_t *c = api_collective(v);
    if (!c)
        return VGPU_EINVAL;
    return comm_reduce_scatter(c, sendbuff, recvbuff, recvcount, (enum comm_dtype)datatype,
                               (enum comm_reduce_op)op);
}

int vgpu_reduce(const void *sendbuff, void *recvbuff, size_t count, vgpu_datatype_t datatype,
                vgpu_op_t op, int root, vgpu_t *v)
{
    comm_t *c = api_collective(v);
    if (!c)
        return VGPU_EINVAL;
    return comm_reduce(c, sendbuff, recvbuff, count, (enum comm_dtype)datatype,
                       (enum comm_reduce_op)op, root);
}

int vgpu_send(const void *sendbuff, size_t count, vgpu_datatype_t datatype, int peer, vgpu_t *v)
{
    int ok;
    const size_t bytes = bytes_of_(count, datatype, &ok);
    comm_t *c = api_collective(v);
    return c && ok ? comm_send(c, sendbuff, bytes, peer) : VGPU_EINVAL;
}

int vgpu_recv(void *recvbuff, size_t count, vgpu_datatype_t datatype, int peer, vgpu_t *v)
{
    int ok;
    const size_t bytes = bytes_of_(count, datatype, &ok);
    comm_t *c = api_collective(v);
    return c && ok ? comm_recv(c, recvbuff, bytes, peer) : VGPU_EINVAL;
}

int vgpu_barrier(vgpu_t *v)
{
    comm_t *c = api_collective(v);
    return c ? comm_barrier(c) : VGPU_EINVAL;
}

int vgpu_all_reduce_update(float *grads, float *params, size_t count, vgpu_update_fn update,
                           void *ctx, vgpu_t *v)
{
    comm_t *c = api_collective(v);
    return c && update ? comm_all_reduce_update(c, grads, params, count, update, ctx)
                       : VGPU_EINVAL;
}

int vgpu_get_comm_stats(const vgpu_t *v, struct vgpu_comm_stats *out)
{
    comm_t *c = api_comm((vgpu_t *)v);
    if (!c || !out)
        return VGPU_EINVAL;
    const struct comm_stats s = comm_get_stats(c);
    *out = (struct vgpu_comm_stats){.calls = s.calls, .bytes = s.bytes, .seconds = s.seconds,
                                    .wait_seconds = s.wait_seconds, .wait_known = s.wait_known};
    return 0;
}

const char *vgpu_all_reduce_algorithm(const vgpu_t *v, size_t bytes)
{
    comm_t *c = api_comm((vgpu_t *)v);
    return c ? comm_algo_name(c, bytes) : "none";
}

// ---- host collectives ----

int vgpu_ctrl_all_reduce(const void *sendbuff, void *recvbuff, size_t count,
                         vgpu_datatype_t datatype, vgpu_op_t op, vgpu_t *v)
{
    return v && runtime_collective_thread_ok()
               ? runtime_host_all_reduce(&v->rt, sendbuff, recvbuff, count,
                                         (enum comm_dtype)datatype, (enum comm_reduce_op)op)
               : VGPU_EINVAL;
}

int vgpu_ctrl_broadcast(void *buff, size_t bytes, int root, vgpu_t *v)
{
    return v && runtime_collective_thread_ok() ? runtime_host_broadcast(&v->rt, buff, bytes, root)
                                                : VGPU_EINVAL;
}

int vgpu_ctrl_all_gather(const void *sendbuff, void *recvbuff, size_t bytes, vgpu_t *v)
{
    return v && runtime_collective_thread_ok()
               ? runtime_host_all_gather(&v->rt, sendbuff, recvbuff, bytes)
               : VGPU_EINVAL;
}

// ---- the flight recorder and the timeline ----

_Static_assert((int)vgpu_phase_setup == (int)FLIGHT_PHASE_SETUP &&
                   (int)vgpu_phase_data == (int)FLIGHT_PHASE_DATA &&
                   (int)vgpu_phase_forward == (int)FLIGHT_PHASE_FORWARD &&
                   (int)vgpu_phase_backward == (int)FLIGHT_PHASE_BACKWARD &&
                   (int)vgpu_phase_optimizer == (int)FLIGHT_PHASE_OPTIMIZER &&
                   (int)vgpu_phase_eval == (int)FLIGHT_PHASE_EVAL &&
                   (int)vgpu_phase_checkpoint == (int)FLIGHT_PHASE_CHECKPOINT,
               "vgpu_phase_t is enum flight_phase");
// The public spans are numbered for the program; the timeline's own kinds
// (collectives, ring phases, waits) are not the program's to record.
static const enum trace_what span_what_[] = {
    [vgpu_span_step] = TRACE_STEP,
    [vgpu_span_data] = TRACE_DATA,
    [vgpu_span_forward] = TRACE_FORWARD,
    [vgpu_span_backward] = TRACE_BACKWARD,
    [vgpu_span_optimizer] = TRACE_OPTIMIZER,
    [vgpu_span_eval] = TRACE_EVAL,
    [vgpu_span_checkpoint] = TRACE_CHECKPOINT,
    [vgpu_span_injected_slowness] = TRACE_INJECTED_SLOW,
    [vgpu_span_gradient_bucket] = TRACE_BUCKET,
};

void vgpu_mark_phase(vgpu_t *v, vgpu_phase_t phase)
{
    if (v && phase >= vgpu_phase_setup && phase <= vgpu_phase_checkpoint)
        flight_phase((enum flight_phase)phase);
}

void vgpu_mark_step(vgpu_t *v, int64_t step)
{
    if (v)
        flight_step(step);
}

uint64_t vgpu_span_begin(void) { return trace_begin(); }

void vgpu_span_end(vgpu_t *v, vgpu_span_t what, uint64_t t0, int64_t arg, int64_t arg2)
{
    if (v && what >= vgpu_span_step && what <= vgpu_span_gradient_bucket)
        trace_end(span_what_[what], 0, t0, arg, arg2);
}

int vgpu_timeline_begin(vgpu_t *v, const char *path, const char *label)
{
    return api_device(v) && path && label ? runtime_trace_begin(&v->rt, path, label) : VGPU_EINVAL;
}

int vgpu_timeline_write(vgpu_t *v) { return api_device(v) ? runtime_trace_write(&v->rt) : VGPU_EINVAL; }

int vgpu_timeline_note(vgpu_t *v, const char *key, double value)
{
    return api_device(v) && trace_enabled_ ? trace_note(key, value) : VGPU_EINVAL;
}

void vgpu_on_signal(int sig) { runtime_on_signal(sig); }

void vgpu_abort(vgpu_t *v, int exit_code)
{
    runtime_abort(v ? &v->rt : NULL, exit_code);
}
