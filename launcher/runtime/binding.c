// binding.c: ranks -> devices and memory caps.
#include "binding.h"
#include "gpu_driver.h"

#include <stdio.h>
#include <string.h>

#include "status.h"
#include "util.h"

// A GPU: contexts and buffers beside the caps, which take a share of free memory.
static int is_gpu_(const struct device_info *d) { return (device_kind_caps(d->kind) & DEVICE_CAP_GPU) != 0; }

// a + b, or UINT64_MAX when that does not fit.
static uint64_t add_sat_(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

int binding_place(const struct binding_request *req, struct binding *out, char *err,
                  size_t err_bytes)
{
    int n = req->local_size, nd = req->ndevices;
    if (n <= 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG, "no ranks to bind");
    if (nd <= 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "local rank 0 has no device: no devices are visible on this host");
    if (req->memory_limit && req->memory_fraction > 0)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "devices.memory_limit and devices.memory_fraction conflict: set one of them");
    if (req->map && req->ranks_per_device)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "devices.map and devices.ranks_per_device conflict: set one of them");

    // 1. Which device each rank goes to.
    int same_view = 1;
    for (int r = 1; req->visible && r < n; r++)
        same_view &= req->visible[r] == req->visible[0];
    if (req->map) {
        if (req->map_count != n)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "devices.map lists %d devices but this host runs %d ranks: give one entry "
                               "per local rank",
                               req->map_count, n);
        for (int r = 0; r < n; r++) {
            if (req->map[r] < 0 || req->map[r] >= nd)
                return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                   "devices.map sends local rank %d to device %ld, but only devices 0..%d "
                                   "are visible",
                                   r, req->map[r], nd - 1);
            out[r].device = (int)req->map[r];
        }
    } else if (!same_view) {
        for (int r = 0; r < n; r++) {
            int first = -1;
            for (int k = 0; k < nd && k < 64 && first < 0; k++)
                if (req->visible[r] >> k & 1)
                    first = k;
            if (first < 0)
                return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                   "local rank %d sees no device while others do: its "
                                   "CUDA_VISIBLE_DEVICES (or the scheduler's per-task binding) "
                                   "hides every GPU",
                                   r);
            out[r].device = first;
        }
    } else {
        long per = req->ranks_per_device ? req->ranks_per_device : (n + nd - 1) / nd;
        for (int r = 0; r < n; r++) {
            long dev = r / per;
            if (dev >= nd)
                return util_errorf(err, err_bytes, VGPU_ECONFIG,
                                   "local rank %d has no device: %d ranks, %d device%s and "
                                   "devices.ranks_per_device = %ld give room for %ld ranks; raise "
                                   "ranks_per_device or run fewer ranks per host",
                                   r, n, nd, nd == 1 ? "" : "s", per, per * nd);
            out[r].device = (int)dev;
        }
    }

    for (int r = 0; r < n; r++) {
        const struct device_info *dv = &req->devices[out[r].device];
        if (req->visible && !(req->visible[r] >> out[r].device & 1))
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "local rank %d is bound to %s%d (%s) but does not see it (its "
                               "CUDA_VISIBLE_DEVICES); bind it to a device it sees",
                               r, device_kind_name(dv->kind), out[r].device, dv->uuid);
        if (dv->compute_mode == GPU_MODE_PROHIBITED)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "local rank %d is bound to %s%d (%s), whose compute mode is "
                               "PROHIBITED: no process may use it",
                               r, device_kind_name(dv->kind), out[r].device, dv->uuid);
    }

    // 2. Slots and sharing counts.
    for (int r = 0; r < n; r++) {
        out[r].slot = 0;
        out[r].ranks_on_device = 0;
        for (int q = 0; q < n; q++) {
            if (out[q].device != out[r].device)
                continue;
            out[r].ranks_on_device++;
            if (q < r)
                out[r].slot++;
        }
    }

    // An EXCLUSIVE_PROCESS device takes one process: ranks 2..k would fail
    // to create their contexts. MPS makes its server that one process.
    for (int r = 0; r < n && !req->mps; r++) {
        const struct device_info *dv = &req->devices[out[r].device];
        if (dv->compute_mode == GPU_MODE_EXCLUSIVE_PROCESS && out[r].ranks_on_device > 1)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "%s%d (%s, %s) is in EXCLUSIVE_PROCESS compute mode: one process "
                               "may use it, and %d ranks are bound to it; run one rank per GPU, "
                               "start MPS (vgpurun --mps), or have the GPU set to DEFAULT "
                               "(nvidia-smi -c DEFAULT)",
                               device_kind_name(dv->kind), out[r].device, dv->name, dv->uuid, out[r].ranks_on_device);
    }
    for (int r = 0; r < n; r++)
        out[r].cap_bytes = 0;
    return 0;
}

int binding_compute(const struct binding_request *req, struct binding *out, char *err,
                    size_t err_bytes)
{
    char a[32], b[32], c[32], d[32];
    const int n = req->local_size, nd = req->ndevices;
    const int placed = binding_place(req, out, err, err_bytes);
    if (placed < 0)
        return placed;

    // 3. Caps, then whether each device holds its ranks.
    for (int r = 0; r < n; r++) {
        const struct device_info *dv = &req->devices[out[r].device];
        uint64_t k = (uint64_t)out[r].ranks_on_device;
        uint64_t cap;
        if (req->memory_limit) {
            cap = req->memory_limit;
        } else if (req->memory_fraction > 0) {
            cap = (uint64_t)(req->memory_fraction * (double)dv->free_bytes / (double)k);
        } else if (is_gpu_(dv)) {
            // Outside the caps: each rank's context, and where the backend
            // may run with k ranks on the device, its buffers (NCCL's), so
            // that it finds its room.
            const int backend_here = (uint64_t)req->backend_max_ranks >= k;
            const uint64_t beside =
                add_sat_(req->overhead_bytes, backend_here ? req->backend_extra_bytes : 0);
            uint64_t overhead = k * beside;
            uint64_t usable = dv->free_bytes > overhead ? dv->free_bytes - overhead : 0;
            cap = (uint64_t)(BINDING_CUDA_AUTO_SHARE * (double)usable / (double)k);
            // Under MPS a client may hold no more than its pinned limit,
            // what it allocates beside the cap included.
            const uint64_t lim = dv->client_limit_bytes;
            if (lim && cap > (lim > beside ? lim - beside : 0))
                cap = lim > beside ? lim - beside : 0;
        } else {
            cap = BINDING_CPU_DEFAULT_CAP;
            if (cap > dv->free_bytes / 2 / k) // leave the host room to live in
                cap = dv->free_bytes / 2 / k;
        }
        cap = cap / ARENA_ALIGN * ARENA_ALIGN;
        const uint64_t lim = dv->client_limit_bytes;
        if (lim && add_sat_(cap, req->overhead_bytes) > lim)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "local rank %d: its cap %s + CUDA context %s is over its MPS limit %s "
                               "on %s%d (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT); lower the cap, or raise "
                               "the limit (vgpurun --mps sets it to --mem-per-rank + 1.5 GiB)",
                               r, util_format_bytes(cap, a, sizeof a),
                               util_format_bytes(req->overhead_bytes, b, sizeof b),
                               util_format_bytes(lim, c, sizeof c), device_kind_name(dv->kind), out[r].device);
        const uint64_t need = req->min_bytes > ARENA_ALIGN ? req->min_bytes : ARENA_ALIGN;
        if (req->memory_limit && cap < need)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "devices.memory_limit = %s is below the %s each rank needs%s; "
                               "raise it or use a smaller model or batch",
                               util_format_bytes(req->memory_limit, a, sizeof a),
                               util_format_bytes(need, b, sizeof b),
                               req->memory_limit < (1u << 20)
                                   ? " (a number without a unit is bytes: write e.g. 512M or 2G)"
                                   : "");
        if (cap == 0)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "local rank %d gets a memory cap of 0 bytes on %s%d (%s free, %llu ranks "
                               "share it)",
                               r, device_kind_name(dv->kind), dv->index, util_format_bytes(dv->free_bytes, a, sizeof a),
                               (unsigned long long)k);
        if (req->min_bytes && cap < req->min_bytes)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "local rank %d: memory cap %s is below the %s this job needs; raise "
                               "devices.memory_limit or use a smaller model or batch",
                               r, util_format_bytes(cap, a, sizeof a),
                               util_format_bytes(req->min_bytes, b, sizeof b));
        out[r].cap_bytes = cap;
    }
    for (int dev = 0; dev < nd; dev++) {
        uint64_t sum = 0, ranks = 0;
        for (int r = 0; r < n; r++)
            if (out[r].device == dev) {
                sum = add_sat_(sum, out[r].cap_bytes); // caps near 2^64 must not wrap to "fits"
                ranks++;
            }
        if (!ranks)
            continue;
        const struct device_info *dv = &req->devices[dev];
        const uint64_t overhead = req->overhead_bytes > UINT64_MAX / ranks
                                      ? UINT64_MAX
                                      : ranks * req->overhead_bytes;
        uint64_t need = add_sat_(sum, overhead);
        if (need > dv->free_bytes)
            return util_errorf(err, err_bytes, VGPU_ECONFIG,
                               "device %s%d (%s) cannot hold its %llu ranks: caps %s + overhead %llu x %s "
                               "= %s, but only %s is free; lower devices.memory_limit or run fewer ranks "
                               "per device",
                               device_kind_name(dv->kind), dv->index, dv->name, (unsigned long long)ranks,
                               util_format_bytes(sum, a, sizeof a), (unsigned long long)ranks,
                               util_format_bytes(req->overhead_bytes, b, sizeof b),
                               util_format_bytes(need, c, sizeof c),
                               util_format_bytes(dv->free_bytes, d, sizeof d));
    }
    return 0;
}

int binding_check_headroom(const struct binding *b, const struct device_info *dv,
                           uint64_t context_bytes, uint64_t extra_bytes, const char *extra_what,
                           char *err, size_t err_bytes)
{
    const uint64_t k = (uint64_t)(b->ranks_on_device > 0 ? b->ranks_on_device : 1);
    const uint64_t each = add_sat_(add_sat_(b->cap_bytes, context_bytes), extra_bytes);
    const uint64_t need = each > UINT64_MAX / k ? UINT64_MAX : each * k;
    char cap[32], ctx[32], extra[32], sum[32], free_b[32];
    const uint64_t lim = dv->client_limit_bytes;
    if (lim && each > lim)
        return util_errorf(err, err_bytes, VGPU_ECONFIG,
                           "%s%d: cap %s + CUDA context %s + %s %s = %s is over this rank's MPS "
                           "limit %s (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT): lower devices.memory_limit "
                           "or raise the limit",
                           device_kind_name(dv->kind), b->device, util_format_bytes(b->cap_bytes, cap, sizeof cap),
                           util_format_bytes(context_bytes, ctx, sizeof ctx), extra_what,
                           util_format_bytes(extra_bytes, extra, sizeof extra),
                           util_format_bytes(each, sum, sizeof sum),
                           util_format_bytes(lim, free_b, sizeof free_b));
    if (need <= dv->free_bytes)
        return 0;
    return util_errorf(err, err_bytes, VGPU_ECONFIG,
                       "%s%d (%s) cannot hold %llu x (cap %s + CUDA context %s + %s %s) = %s; %s "
                       "is free: lower devices.memory_limit (the automatic cap leaves room)",
                       device_kind_name(dv->kind), b->device, dv->name, (unsigned long long)k,
                       util_format_bytes(b->cap_bytes, cap, sizeof cap),
                       util_format_bytes(context_bytes, ctx, sizeof ctx), extra_what,
                       util_format_bytes(extra_bytes, extra, sizeof extra),
                       util_format_bytes(need, sum, sizeof sum),
                       util_format_bytes(dv->free_bytes, free_b, sizeof free_b));
}
