// hostmem.h: how much memory this process can still take, for the bounds
// that keep a job from being OOM-killed half-way: device caps (CPU arenas)
// and the data each rank loads.
#ifndef VGPU_HOSTMEM_H
#define VGPU_HOSTMEM_H

#include <stdint.h>

// Bytes of a /proc/meminfo line (e.g. "MemAvailable"); 0 when absent.
uint64_t hostmem_meminfo(const char *key);

// Room left under this process's memory cgroup: the tightest of v2
// memory.max or v1 memory.limit_in_bytes, less usage, over the cgroup and
// its ancestors; UINT64_MAX when none is set.
uint64_t hostmem_cgroup_room(void);

// MemAvailable bounded by hostmem_cgroup_room (the room alone when the
// kernel does not say MemAvailable).
uint64_t hostmem_available(void);

#endif
