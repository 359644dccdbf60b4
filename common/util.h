// util.h: small helpers shared by every layer: clocks, hashing, sizes, whole
// files.
#ifndef VGPU_UTIL_H
#define VGPU_UTIL_H

#include <stddef.h>
#include <stdint.h>

// Monotonic time in seconds.
double util_now_s(void);

// A bounded wait's clock: the time since the wait began, less every gap of
// more than UTIL_WAIT_GAP_S between two looks at it. Such a gap is time this
// process itself spent stopped (SIGSTOP, a suspended job, a debugger), not
// time the awaited peer took: every wait looks at least every 50 ms. One
// rule for every wait, so a job suspended as a whole resumes.
#define UTIL_WAIT_GAP_S 1.0
struct util_wait_clock {
    double start_s, last_s, lost_s;
};
// Inline, so that the clock they read is the caller's util_now_s (the unit
// tests replace it with --wrap, which reaches calls between objects only).
static inline void util_wait_clock_start(struct util_wait_clock *w)
{
    w->start_s = w->last_s = util_now_s();
    w->lost_s = 0;
}

// Seconds waited so far by that rule (and records this look).
static inline double util_wait_clock_waited(struct util_wait_clock *w)
{
    const double now = util_now_s();
    if (now - w->last_s > UTIL_WAIT_GAP_S)
        w->lost_s += now - w->last_s;
    w->last_s = now;
    return now - w->start_s - w->lost_s;
}

// Set on a thread whose waits run beside the process's own compute
// (libvgpu: a collective called off vgpu_init's thread, as an all-reduce
// overlapped with a backward pass): its waits nap from the first look,
// UTIL_BESIDE_NAP_NS at a time, instead of spinning and yielding first. The
// core is the compute's, and each wake-up takes it from the compute. 0 on
// every other thread.
extern __thread int util_waits_beside_compute; // (__thread: C and CUDA C++ include this)
#define UTIL_BESIDE_NAP_NS 100000

// What tells this machine from another into out[bytes]: the running
// kernel's boot id. Ranks of different "hosts" can share one (network
// namespaces, containers: what the cluster tests rehearse on), and then they
// share its cores too. Without it, "host:" and the host name.
void util_machine_id(char *out, size_t bytes, const char *host);

// Process pid's state letter ('R', 'S', 'Z' for a zombie, 'X' dead...) and its
// parent's pid from /proc/PID/stat (its name may hold spaces and parentheses).
// Returns 0, or -1 when there is no such process (ppid may be NULL).
int util_proc_stat(long pid, char *state, long *ppid);
// Whether process pid has ended: no such process, or a zombie (exited, not
// reaped: a parent that does not reap, as some containers' init).
int util_proc_gone(long pid);

// CRC32 (zlib's polynomial) of a byte range, continuing from `crc` (start at 0).
uint32_t util_crc32(uint32_t crc, const void *data, size_t bytes);

// 64-bit FNV-1a-style hash of a byte range, continuing from `h` (start at 0).
uint64_t util_hash64(uint64_t h, const void *data, size_t bytes);

// Writes a printf-style message into err (if err and err_bytes) and returns
// status: the one-line "report and fail" of functions with an err buffer.
int util_errorf(char *err, size_t err_bytes, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

// Formats bytes as "96.0 MiB" into buf; returns buf.
char *util_format_bytes(uint64_t bytes, char *buf, size_t buf_bytes);

// Reads the regular file at path whole: *data (malloc'd, the caller frees it)
// holds its *bytes bytes and a NUL after them, so that a text file is also a
// string. A FIFO or a device is refused without blocking (the open does not
// wait), and so is a file of more than max_bytes. `what` names the file in
// the messages: "PATH: cannot open WHAT: why", "PATH: a directory, not a
// WHAT file", "PATH: WHAT file larger than 16 MiB". Returns 0; -errno when
// it cannot be opened; VGPU_EIO when it is not a regular file, is too large
// or fails to read; VGPU_ENOMEM; the message in err (*data NULL, *bytes 0).
int util_read_file(const char *path, const char *what, size_t max_bytes, void **data,
                   size_t *bytes, char *err, size_t err_bytes);

#endif
