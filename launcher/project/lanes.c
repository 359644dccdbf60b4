// lanes.c: a step's compute as a host lane and a device lane (lanes.h;
// docs/PROJECTION.md, "The lanes").
#include "lanes.h"

#include <math.h>
#include <string.h>

int lanes_apply(const struct trace_profile *p, const struct target *t)
{
    return p->has_ops && t->device.launch_us > 0 && !t->device.measured;
}

// One kind of operation on the device: the largest of its FLOPs at the
// peak, its bytes at the rate, its count at the shortest kernel (a
// synchronous device has no floor of its own: an operation's least cost is
// its call, the launch); added to the term that set it.
static void device_kind_(struct lanes *l, const struct profile_ops *o, const struct target *t,
                         double peak_flops, double bytes_per_s, double rows)
{
    const double flop = peak_flops > 0 ? o->flops * rows / peak_flops : 0;
    const double bytes = bytes_per_s > 0 ? o->bytes * rows / bytes_per_s : 0;
    const double floor = t->device.synchronous ? 0 : o->count * t->device.kernel_min_us * 1e-6;
    if (flop >= bytes && flop >= floor)
        l->flop_s += flop;
    else if (bytes >= floor)
        l->bytes_s += bytes;
    else
        l->floor_s += floor;
}

void lanes_compute(struct lanes *l, const struct trace_profile *p, const struct target *t,
                   double peak_flops, double rows)
{
    memset(l, 0, sizeof *l);
    const double memory = t->device.memory_gbyte_per_s * 1e9;
    const double link = t->device.host_link_gbyte_per_s > 0 ? t->device.host_link_gbyte_per_s * 1e9
                                                            : memory;
    double ops = 0;
    for (int k = 0; k < PROFILE_OP_KINDS; k++) {
        if (k == PROFILE_OP_SYNC)
            continue;
        ops += p->ops[k].count;
        device_kind_(l, &p->ops[k], t, peak_flops, k == PROFILE_OP_COPY_HOST ? link : memory, rows);
    }
    l->device_s = l->flop_s + l->bytes_s + l->floor_s;
    l->own_s = p->host_us * 1e-6;
    l->launch_s = ops * t->device.launch_us * 1e-6;
    l->sync_s = p->ops[PROFILE_OP_SYNC].count * t->device.sync_us * 1e-6;
    const double launches = l->launch_s + l->sync_s;
    if (t->device.synchronous) {
        // Each call holds the host until its work is done: the lanes add up.
        l->host_s = l->own_s + launches;
        l->compute_s = l->host_s + l->device_s;
    } else {
        // The host queues the step's operations and then waits for the
        // device (a step ends with its results read): the device starts
        // with the first launch; each wait costs the host sync_us more.
        l->host_s = l->own_s + l->launch_s;
        l->compute_s = fmax(l->host_s, t->device.launch_us * 1e-6 + l->device_s) + l->sync_s;
    }
    // What limits it: on a synchronous device the largest part of the sum;
    // else the longer lane, and in it its largest part.
    const double parts[] = {[LANES_LAUNCH] = launches, [LANES_HOST] = l->own_s,
                            [LANES_FLOOR] = l->floor_s, [LANES_COMPUTE] = l->flop_s,
                            [LANES_MEMORY] = l->bytes_s};
    int first = LANES_LAUNCH, last = LANES_MEMORY;
    if (!t->device.synchronous && l->host_s >= t->device.launch_us * 1e-6 + l->device_s)
        last = LANES_HOST;
    else if (!t->device.synchronous)
        first = LANES_FLOOR;
    l->limit = (enum lanes_limit)first;
    for (int i = first + 1; i <= last; i++)
        if (parts[i] > parts[l->limit])
            l->limit = (enum lanes_limit)i;
}
