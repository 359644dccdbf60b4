// log.h: rank-tagged diagnostics, the TRY macro, and the fatal-error path.
#ifndef VGPU_LOG_H
#define VGPU_LOG_H

#include <stdarg.h>

#include "status.h"

#if defined(__GNUC__)
#define VGPU_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define VGPU_NORETURN __attribute__((noreturn))
#else
#define VGPU_PRINTF(fmt, args)
#define VGPU_NORETURN
#endif

// Identity printed in front of per-rank diagnostics: "[rank R@host]".
// Before this is called, messages carry no rank tag.
void log_set_identity(int rank, const char *host);

// Called by log_fatal after printing; the launcher installs one that calls
// MPI_Abort so that no peer is left waiting. Default: exit(code).
typedef void (*log_fatal_hook_fn)(int exit_code);
void log_set_fatal_hook(log_fatal_hook_fn hook);

// Errors and warnings go to stderr, tagged with the rank identity.
void log_error(const char *fmt, ...) VGPU_PRINTF(1, 2);
void log_warn(const char *fmt, ...) VGPU_PRINTF(1, 2);

// Writes text (lines ending in newlines) to stderr at once, each line tagged
// with the rank identity: a report of several lines stays together.
void log_lines(const char *text);

// Prints "[rank R@host] file:line: message" and ends the whole job with
// exit_code through the fatal hook. Never returns.
void log_fatal_at(const char *file, int line, int exit_code, const char *fmt, ...)
    VGPU_PRINTF(4, 5) VGPU_NORETURN;
#define FATAL(exit_code, ...) log_fatal_at(__FILE__, __LINE__, (exit_code), __VA_ARGS__)

// Records "file:line: expr -> status" once per failure path and returns the
// status from the calling function, so the caller decides what to do.
void log_trace_at(const char *file, int line, const char *expr, int status);
#define TRY(expr)                                            \
    do {                                                     \
        int try_rc_ = (expr);                                \
        if (try_rc_ < 0) {                                   \
            log_trace_at(__FILE__, __LINE__, #expr, try_rc_); \
            return try_rc_;                                  \
        }                                                    \
    } while (0)

// TRY_GOTO(expr, rc, label): as TRY, but stores the status in rc and jumps
// to label, for functions that release what they hold before returning.
#define TRY_GOTO(expr, rc, label)                         \
    do {                                                  \
        (rc) = (expr);                                    \
        if ((rc) < 0) {                                   \
            log_trace_at(__FILE__, __LINE__, #expr, (rc)); \
            goto label;                                   \
        }                                                 \
    } while (0)

// Whether TRY prints its trace lines (default: on; tests turn it off).
void log_set_trace(int enabled);

#endif
