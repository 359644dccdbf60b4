// vgpu_internal.h: the handle behind vgpu_t, shared by libvgpu's public
// functions (vgpu_api.c: vgpu/vgpu.h, vgpu/vgpu_ext.h; vgpu_tree.c: the tree
// all-reduce; vgpu_math.c: the device vgpu_train's math runs on). Not installed.
#ifndef VGPU_API_INTERNAL_H
#define VGPU_API_INTERNAL_H

#include <vgpu/vgpu.h>
#include <vgpu/vgpu_ext.h>

#include "comm.h"
#include "device_internal.h"
#include "runtime.h"

struct vgpu {
    struct runtime rt;
    struct vgpu_options options; // as given to vgpu_join (vgpu_open's defaults)
    int opened;                  // vgpu_open succeeded (a device, unless planned)
    int open_tried;              // vgpu_open was called (once a handle)
};

// The rank's open device, or NULL before vgpu_open (or after a plan).
static inline device_t *api_device(vgpu_t *v)
{
    return v && v->opened && !v->rt.planned ? &v->rt.dev : NULL;
}

// The rank's collectives, or NULL when there is no open device.
static inline comm_t *api_comm(vgpu_t *v) { return api_device(v) ? v->rt.comm : NULL; }

// The rank's collectives for a collective call: NULL also when this thread
// may not call one (vgpu.h: Threads; said).
static inline comm_t *api_collective(vgpu_t *v)
{
    comm_t *c = api_comm(v);
    return c && runtime_collective_thread_ok() ? c : NULL;
}

#endif
