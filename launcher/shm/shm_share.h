// shm_share.h: memory shared between the processes of one host with no name
// anywhere. The owner creates an anonymous memfd; a peer opens it through
// /proc/<owner pid>/fd/<fd> while the owner still holds it.
//
// Why no names: a name in /dev/shm outlives every process that dies before
// removing it (a killed rank left its whole cap behind), and another local
// user can create a name first and make the job fail. A memfd's pages go
// when the last process that maps or holds it goes, however it ends; nothing
// is ever in /dev/shm, so its size (64 MB in Docker) does not limit a job
// either. What it needs: the ranks of a host run as one user in one PID
// namespace, which is what one job's ranks do.
#ifndef VGPU_SHM_SHARE_H
#define VGPU_SHM_SHARE_H

#include <stdint.h>

// What a peer needs to open a segment; plain data, sent over MPI as bytes.
struct shm_handle {
    int32_t pid;    // owner's process id (0: no segment)
    int32_t fd;     // owner's descriptor of the memfd
    uint64_t dev;   // identity of the file, checked on open: a reused pid or
    uint64_t ino;   // another PID namespace cannot pass for the owner
    uint64_t bytes; // size of the segment, bytes
};

// Creates a segment of `bytes`, fills *h and returns the descriptor (>= 0;
// close it once every peer has mapped), or a negative status. `tag` names
// the memfd in /proc/<pid>/maps, e.g. "vgpu-arena". With `commit` the pages
// are committed now, so running short of memory is an error here and not a
// SIGBUS later; without it they come as touched (a simulated GPU's cap
// describes the GPU's memory, not the host's).
int shm_share_create(const char *tag, uint64_t bytes, int commit, struct shm_handle *h);

// Maps a peer's segment (read-write when `writable`) into *map, h->bytes long.
// Returns 0, or a negative status after logging what failed and why.
int shm_share_map(const struct shm_handle *h, int writable, void **map);

#endif
