// log.c: rank-tagged diagnostics and the fatal-error path.
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char identity_[96];
static log_fatal_hook_fn fatal_hook_;
static int trace_enabled_ = 1;

void log_set_identity(int rank, const char *host)
{
    snprintf(identity_, sizeof identity_, "[rank %d@%s] ", rank, host ? host : "?");
}

void log_set_fatal_hook(log_fatal_hook_fn hook) { fatal_hook_ = hook; }

void log_set_trace(int enabled) { trace_enabled_ = enabled; }

static void vlog_(const char *kind, const char *fmt, va_list ap)
{
    // One fprintf per line so that lines from different ranks do not interleave.
    char msg[2048];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "%s%s%s\n", identity_, kind, msg);
    fflush(stderr);
}

void log_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog_("error: ", fmt, ap);
    va_end(ap);
}

void log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog_("warning: ", fmt, ap);
    va_end(ap);
}

void log_lines(const char *text)
{
    size_t lines = 1, len = strlen(text);
    for (const char *c = text; *c; c++)
        lines += *c == '\n';
    char *buf = malloc(len + lines * (strlen(identity_) + 1) + 1);
    if (!buf) {
        fputs(text, stderr);
        return;
    }
    size_t at = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        const size_t n = end ? (size_t)(end - line) : strlen(line);
        at += (size_t)sprintf(buf + at, "%s%.*s\n", identity_, (int)n, line);
        line += n + (end != NULL);
    }
    fwrite(buf, 1, at, stderr);
    fflush(stderr);
    free(buf);
}

void log_fatal_at(const char *file, int line, int exit_code, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    fprintf(stderr, "%s%s:%d: %s\n", identity_, base ? base + 1 : file, line, msg);
    fflush(stderr);
    if (fatal_hook_)
        fatal_hook_(exit_code);
    exit(exit_code);
}

void log_trace_at(const char *file, int line, const char *expr, int status)
{
    if (!trace_enabled_)
        return;
    const char *base = strrchr(file, '/');
    fprintf(stderr, "%s  at %s:%d: %s -> %s\n", identity_, base ? base + 1 : file, line, expr,
            status_str(status));
}
