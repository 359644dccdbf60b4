// devcoll.h: collectives that stay on the device, for ranks of one host
// that share a GPU under MPS (issue 43). Each rank owns a dedicated window
// (devcoll_proto.h: mailboxes and four data areas) that every peer opens
// once; a call is one launch of the protocol on the caller's stream and
// returns at once, as NCCL's do. The protocol is the same code on a GPU
// (devcoll_cuda.cu) and on the simulated device (devcoll_sim.c: host
// shared memory, the calling thread), where the tests run it.
//
// Set-up, on every rank: devcoll_create, then the ranks exchange their
// devcoll_handle (MPI, or vgpu's NCCL's shared memory), then
// devcoll_connect. Every rank must make the same calls in the same order;
// a call whose type, count, operation or root differs from a peer's fails
// on every rank before anything is written. Errors are asynchronous, as
// NCCL's: devcoll_error says what the device found (a peer that timed out,
// died or called differently); after one, every later call fails.
#ifndef VGPU_DEVCOLL_H
#define VGPU_DEVCOLL_H

#include <stddef.h>
#include <stdint.h>

#include "devcoll_proto.h"

#define DEVCOLL_WIN_HANDLE_BYTES 64

// How the protocol runs on one kind of device: its memory and its launch.
struct devcoll_exec {
    const char *name; // "cuda", "sim"
    // A window of `bytes` that peers can open (zeroed), and what they need.
    int (*win_create)(void *ctx, uint64_t bytes, void **win,
                      unsigned char handle[DEVCOLL_WIN_HANDLE_BYTES]);
    int (*win_open)(void *ctx, const unsigned char handle[DEVCOLL_WIN_HANDLE_BYTES],
                    uint64_t bytes, void **win);
    void (*win_close)(void *ctx, void *win, uint64_t bytes); // a peer's
    void (*win_free)(void *ctx, void *win, uint64_t bytes, // this rank's, as created
                     const unsigned char handle[DEVCOLL_WIN_HANDLE_BYTES]);
    // struct dc_status that the host and the device both reach: *host for
    // the host, *dev for the protocol (the same on the simulated device).
    int (*status_alloc)(void *ctx, struct dc_status **host, struct dc_status **dev);
    void (*status_free)(void *ctx, struct dc_status *host);
    // Runs (or enqueues on `stream`, NULL: the exec's own) the protocol for
    // *a with this many blocks of lanes.
    int (*launch)(void *ctx, void *stream, const struct dc_args *a, int blocks, int lanes);
    // Returns once everything launched has finished.
    int (*sync)(void *ctx);
    // Optional: the most blocks a call may take with n ranks, so that every
    // rank's blocks can be resident at once (block b waits for block b of
    // each peer: a block that cannot start would hold the others to the
    // timeout). NULL: `blocks`.
    int (*max_blocks)(void *ctx, int n);
    int blocks, lanes; // the launch shape: blocks at most, lanes a block
    int on_host;       // runs on the host: its ctx is NULL or a struct devcoll_sim_ctx
};

// The simulated device's ctx where the caller's buffers are not plain host
// memory: host_view(owner, p) is where the host reaches buffer p (NULL: not
// the owner's).
struct devcoll_sim_ctx {
    void *(*host_view)(void *owner, const void *ptr);
    void *owner;
};

// The simulated device (devcoll_sim.c): windows are memfds (shm_share.h),
// the protocol runs on the calling thread, block after block.
extern const struct devcoll_exec devcoll_sim_exec;
// A CUDA GPU (devcoll_cuda.cu; CUDA builds only).
extern const struct devcoll_exec devcoll_cuda_exec;

// What a peer needs from this rank.
struct devcoll_handle {
    unsigned char win[DEVCOLL_WIN_HANDLE_BYTES];
    int32_t pid;       // the rank's process, watched while calls are in flight
    int32_t rank;
    int32_t blocks;     // the most blocks it can launch (every rank takes the least)
    int32_t pad_;
    uint64_t win_bytes; // the window's size (every rank's alike)
};

typedef struct devcoll devcoll_t;

// All-reduce algorithms (VGPU_DEVCOLL_ALGO: auto, oneshot, twoshot).
enum devcoll_algo { DEVCOLL_AUTO, DEVCOLL_ONESHOT, DEVCOLL_TWOSHOT };

// area_bytes: each data area (0: the default, VGPU_DEVCOLL_AREA_KB or
// 4 MiB), rounded down to whole units; timeout_s bounds every wait.
// Returns 0, VGPU_EINVAL (n outside 1..DC_MAX_RANKS, rank outside 0..n-1),
// VGPU_ENOMEM, or the exec's error creating the window.
int devcoll_create(const struct devcoll_exec *ex, void *ctx, int rank, int n,
                   uint64_t area_bytes, double timeout_s, devcoll_t **out);
void devcoll_handle(const devcoll_t *d, struct devcoll_handle *h);
// Before devcoll_connect: the watchdog also aborts this rank's waits once
// failed(arg) says the communicator failed elsewhere (vgpu's NCCL: a peer
// that met an error outside the device collectives and will not come).
void devcoll_watch_also(devcoll_t *d, int (*failed)(void *arg), void *arg);
// Opens every peer's window (all[q] is rank q's handle) and starts the
// watchdog. 0, VGPU_EINVAL (a handle of another size or rank), or the
// exec's error.
int devcoll_connect(devcoll_t *d, const struct devcoll_handle *all);
// Closes the peers' windows (after devcoll_sync). A window's owner frees it
// only once no peer has it open (CUDA: freeing exported memory still open
// elsewhere is undefined), so ranks close, agree, then destroy.
void devcoll_close_peers(devcoll_t *d);
// Closes what is still open and frees this rank's window; after an error on
// a GPU the window is left to the process's end instead (a peer that has
// not yet run its call may still write into it).
void devcoll_destroy(devcoll_t *d);
// devcoll_destroy where the peers may not have closed this rank's window
// yet (no agreement was waited for): on a GPU it is left to the process's
// end; host windows (memfds) go at once, as mappings keep them alive.
void devcoll_abandon(devcoll_t *d);

// The collectives, comm.h's semantics and types (dtype: enum comm_dtype,
// op: enum comm_reduce_op), on device memory, queued on `stream` (a
// cudaStream_t; NULL: the exec's own, the device's); each returns once launched
// (0, VGPU_EINVAL for an argument no rank could pass, or the launch's
// error). Reduce-scatter: send holds n * count, recv count (in place: recv
// is send's block `rank`). All-gather: send holds count, recv n * count (in
// place: send is recv's block `rank`). All-gather and broadcast also take
// DC_BYTE (count bytes); reduce's recv may be NULL but on root.
int devcoll_all_reduce(devcoll_t *d, const void *send, void *recv, uint64_t count, int dtype,
                       int op, void *stream);
int devcoll_reduce_scatter(devcoll_t *d, const void *send, void *recv, uint64_t count,
                           int dtype, int op, void *stream);
int devcoll_all_gather(devcoll_t *d, const void *send, void *recv, uint64_t count, int dtype,
                       void *stream);
int devcoll_broadcast(devcoll_t *d, const void *send, void *recv, uint64_t count, int dtype,
                      int root, void *stream);
int devcoll_reduce(devcoll_t *d, const void *send, void *recv, uint64_t count, int dtype, int op,
                   int root, void *stream);

// Point-to-point, as NCCL's ncclSend/ncclRecv outside a group: `bytes` of
// buf go to rank peer, whose devcoll_recv from this rank takes them; only
// the two ranks take part, and between them messages match in the order
// sent. The send's kernel ends once the receiver has taken the whole
// message, so ranks that exchange order their calls (even ranks send
// first); a size that differs fails both. VGPU_EINVAL: peer not another
// rank, or no buffer for a message that has bytes.
int devcoll_send(devcoll_t *d, const void *buf, uint64_t bytes, int peer, void *stream);
int devcoll_recv(devcoll_t *d, void *buf, uint64_t bytes, int peer, void *stream);

// A barrier in the collectives' sequence that stands for a call made
// elsewhere (vgpu's NCCL's staged engine): it passes where every rank marks
// the same tag, and fails as a mismatch where a peer's call differs (a peer
// in a device collective, or marking another tag), so calls that differ
// fail instead of waiting on two paths.
int devcoll_mark(devcoll_t *d, uint64_t tag, void *stream);

// Waits for every launched call (the exec's sync), then reports.
int devcoll_sync(devcoll_t *d);
// What the device has found so far: 0, VGPU_ETIMEOUT (a peer did not come
// within the timeout), VGPU_ECOMM (a peer failed or died, or the calls
// differed, or devcoll_abort); *peer (may be NULL) the rank named, what (may be NULL) a
// sentence for the log.
int devcoll_error(const devcoll_t *d, int *peer, char *what, size_t what_bytes);
// The kind of what devcoll_error reports (enum dc_error; DC_OK: nothing).
int devcoll_fault(const devcoll_t *d);
// Makes every wait of this rank give up (naming `peer`, or this rank).
void devcoll_abort(devcoll_t *d, int peer);

// VGPU_DEVCOLL: -1 auto (unset), 0 never, 1 wherever the device has them.
int devcoll_mode(void);
// Whether `ranks` ranks that all share one device take the device
// collectives: its kind has them (has_exec), and its contexts run at once
// (a GPU under MPS: a kernel waiting for a peer's would otherwise wait for
// a time slice), or VGPU_DEVCOLL=1 asks. The ring's set-up and the job
// table both ask this.
int devcoll_applies(int mode, int has_exec, int gpu, int mps, int ranks);

// The all-reduce algorithm for `bytes` among n ranks (every rank alike).
enum devcoll_algo devcoll_algo_for(const devcoll_t *d, uint64_t bytes);
const char *devcoll_algo_name(enum devcoll_algo a);
// Rounds launched so far (each call is at least one).
uint64_t devcoll_rounds(const devcoll_t *d);

#endif
