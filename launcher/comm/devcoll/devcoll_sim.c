// devcoll_sim.c: the device collectives on the simulated device. The
// windows are memfds that the peers map (shm_share.h: nothing in /dev/shm,
// gone with the last process); the protocol (devcoll_proto.h, compiled as C)
// runs on the calling thread, its blocks one after another with one lane
// each, so a call returns when it is done. Every rank runs the blocks in
// the same order, and block b waits only for the peers' block b, so this
// order cannot deadlock; a block that read what another block writes would
// read it before it is written here, which the tests would see.
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devcoll.h"
#include "shm_share.h"
#include "status.h"

_Static_assert(sizeof(struct shm_handle) <= DEVCOLL_WIN_HANDLE_BYTES, "a memfd's handle fits");

static int sim_win_create_(void *ctx, uint64_t bytes, void **win,
                           unsigned char handle[DEVCOLL_WIN_HANDLE_BYTES])
{
    (void)ctx;
    struct shm_handle h;
    const int fd = shm_share_create("vgpu-devcoll", bytes, 1, &h);
    if (fd < 0)
        return fd;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    // The descriptor stays open until the window is freed (sim_win_free_):
    // the peers open the memfd through it, whenever they connect.
    if (p == MAP_FAILED) {
        close(fd);
        return VGPU_ENOMEM;
    }
    memset(handle, 0, DEVCOLL_WIN_HANDLE_BYTES);
    memcpy(handle, &h, sizeof h);
    *win = p;
    return 0;
}

static int sim_win_open_(void *ctx, const unsigned char handle[DEVCOLL_WIN_HANDLE_BYTES],
                         uint64_t bytes, void **win)
{
    (void)ctx;
    struct shm_handle h;
    memcpy(&h, handle, sizeof h);
    if (h.bytes != bytes)
        return VGPU_EINVAL;
    return shm_share_map(&h, 1, win);
}

static void sim_win_close_(void *ctx, void *win, uint64_t bytes)
{
    (void)ctx;
    munmap(win, bytes);
}

// The owner held the memfd open for peers that connect late; it goes now.
static void sim_win_free_(void *ctx, void *win, uint64_t bytes,
                          const unsigned char handle[DEVCOLL_WIN_HANDLE_BYTES])
{
    struct shm_handle h;
    memcpy(&h, handle, sizeof h);
    sim_win_close_(ctx, win, bytes);
    close(h.fd);
}

static int sim_status_alloc_(void *ctx, struct dc_status **host, struct dc_status **dev)
{
    (void)ctx;
    struct dc_status *s = calloc(1, sizeof *s);
    if (!s)
        return VGPU_ENOMEM;
    *host = *dev = s;
    return 0;
}

static void sim_status_free_(void *ctx, struct dc_status *host)
{
    (void)ctx;
    free(host);
}

// ctx: NULL where the buffers are plain host memory, else a struct
// devcoll_sim_ctx that reaches them (a CPU device's host view: its device
// pointers fault outside it, as a GPU's would).
static int sim_launch_(void *ctx, void *stream, const struct dc_args *a, int blocks, int lanes)
{
    (void)stream, (void)lanes; // the calling thread is the stream
    struct dc_args on_host = *a;
    const struct devcoll_sim_ctx *sc = ctx;
    if (sc) {
        on_host.send = a->send ? sc->host_view(sc->owner, a->send) : NULL;
        on_host.recv = a->recv ? sc->host_view(sc->owner, a->recv) : NULL;
        if ((a->send && !on_host.send) || (a->recv && !on_host.recv))
            return VGPU_EINVAL; // not the owner's memory
    }
    for (int b = 0; b < blocks; b++) {
        const struct dc_thread t = {.block = b, .blocks = blocks, .lane = 0, .lanes = 1};
        dc_run(&on_host, &t);
    }
    return 0;
}

static int sim_sync_(void *ctx)
{
    (void)ctx;
    return 0;
}

// Two blocks: enough for a block that reads another's units to read them
// before they are written (the test of the pairing), few enough to be cheap.
const struct devcoll_exec devcoll_sim_exec = {
    .name = "sim",
    .win_create = sim_win_create_,
    .win_open = sim_win_open_,
    .win_close = sim_win_close_,
    .win_free = sim_win_free_,
    .status_alloc = sim_status_alloc_,
    .status_free = sim_status_free_,
    .launch = sim_launch_,
    .sync = sim_sync_,
    .max_blocks = NULL,
    .blocks = 2,
    .lanes = 1,
    .on_host = 1,
};
