// json_scan.c: the pull reader of JSON text (json_scan.h).
#include "json_scan.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH_MAX 64 // skipping nests no deeper: a trace's values nest 4 deep

void json_scan_init(struct json_scan *j, const char *text, size_t bytes)
{
    j->text = j->p = text;
    j->end = text + bytes;
    j->err[0] = '\0';
    j->fresh = 0;
}

int json_scan_ok(const struct json_scan *j) { return j->err[0] == '\0'; }

// Records the first error, at the current offset; returns -1.
static int fail_(struct json_scan *j, const char *fmt, ...)
{
    if (j->err[0])
        return -1;
    char what[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (j->p >= j->end)
        snprintf(j->err, sizeof j->err, "the text ends at byte %zu inside a value (cut off?)",
                 (size_t)(j->end - j->text));
    else
        snprintf(j->err, sizeof j->err, "byte %zu: %s", (size_t)(j->p - j->text), what);
    return -1;
}

static void ws_(struct json_scan *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

// Consumes c after white space: 0, or -1 (an error).
static int expect_(struct json_scan *j, char c)
{
    ws_(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return 0;
    }
    return fail_(j, "expected '%c'", c);
}

static int open_(struct json_scan *j, char c)
{
    if (!json_scan_ok(j) || expect_(j, c) < 0)
        return -1;
    j->fresh = 1;
    return 0;
}

int json_scan_object(struct json_scan *j) { return open_(j, '{'); }
int json_scan_array(struct json_scan *j) { return open_(j, '['); }

// After '{' or '[' or a member: 1 when another item follows (its comma
// consumed), 0 at `close` (consumed).
static int next_(struct json_scan *j, char close)
{
    if (!json_scan_ok(j))
        return -1;
    ws_(j);
    if (j->p >= j->end)
        return fail_(j, "unexpected end");
    if (*j->p == close) {
        j->fresh = 0;
        j->p++;
        return 0;
    }
    if (j->fresh) { // the first item follows the opening bracket itself
        j->fresh = 0;
        return 1;
    }
    if (*j->p != ',')
        return fail_(j, "expected ',' or '%c'", close);
    j->p++;
    ws_(j);
    if (j->p < j->end && *j->p == close)
        return fail_(j, "a trailing ','");
    return 1;
}

int json_scan_member(struct json_scan *j, char *key, size_t key_bytes)
{
    int more = next_(j, '}');
    if (more <= 0)
        return more;
    if (json_scan_string(j, key, key_bytes) < 0 || expect_(j, ':') < 0)
        return -1;
    return 1;
}

int json_scan_element(struct json_scan *j) { return next_(j, ']'); }

static int hex_(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

// One escape after '\\' (j at it): the character it stands for.
static int escape_(struct json_scan *j, char *out)
{
    if (j->p >= j->end)
        return fail_(j, "unexpected end");
    const char c = *j->p++;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = strchr(from, c);
    if (c && k) {
        *out = to[k - from];
        return 0;
    }
    if (c != 'u')
        return fail_(j, "a bad escape '\\%c'", c);
    int v = 0;
    for (int i = 0; i < 4; i++, j->p++) {
        const int h = j->p < j->end ? hex_(*j->p) : -1;
        if (h < 0)
            return fail_(j, "a bad \\u escape");
        v = v * 16 + h;
    }
    *out = v < 0x80 ? (char)v : '?';
    return 0;
}

int json_scan_string(struct json_scan *j, char *buf, size_t bytes)
{
    if (!json_scan_ok(j) || expect_(j, '"') < 0)
        return -1;
    size_t n = 0;
    while (j->p < j->end && *j->p != '"') {
        char c = *j->p++;
        if ((unsigned char)c < 0x20)
            return fail_(j, "a control character in a string");
        if (c == '\\' && escape_(j, &c) < 0)
            return -1;
        if (buf && n + 1 < bytes)
            buf[n++] = c;
    }
    if (buf && bytes)
        buf[n] = '\0';
    if (j->p >= j->end)
        return fail_(j, "unexpected end");
    j->p++;
    return 0;
}

int json_scan_number(struct json_scan *j, double *value)
{
    if (!json_scan_ok(j))
        return -1;
    ws_(j);
    const char *start = j->p;
    while (j->p < j->end && *j->p && strchr("+-0123456789.eE", *j->p))
        j->p++;
    char tmp[64];
    const size_t len = (size_t)(j->p - start);
    if (len == 0 || len >= sizeof tmp) {
        j->p = start;
        return fail_(j, len ? "a number too long" : "expected a number");
    }
    memcpy(tmp, start, len);
    tmp[len] = '\0';
    char *stop;
    *value = strtod(tmp, &stop);
    if (*stop || (tmp[0] == '0' && len > 1 && tmp[1] >= '0' && tmp[1] <= '9')) {
        j->p = start;
        return fail_(j, "a bad number '%s'", tmp);
    }
    if (j->p >= j->end)
        return fail_(j, "unexpected end");
    return 0;
}

static int literal_(struct json_scan *j, const char *word)
{
    const size_t len = strlen(word);
    if ((size_t)(j->end - j->p) < len || memcmp(j->p, word, len) != 0)
        return fail_(j, "an unexpected character '%c'", *j->p);
    j->p += len;
    return 0;
}

static int skip_depth_(struct json_scan *j, int depth)
{
    if (!json_scan_ok(j))
        return -1;
    if (depth > DEPTH_MAX)
        return fail_(j, "values nested deeper than %d", DEPTH_MAX);
    ws_(j);
    if (j->p >= j->end)
        return fail_(j, "unexpected end");
    int more;
    switch (*j->p) {
    case '{':
        if (json_scan_object(j) < 0)
            return -1;
        while ((more = json_scan_member(j, NULL, 0)) == 1)
            if (skip_depth_(j, depth + 1) < 0)
                return -1;
        return more;
    case '[':
        if (json_scan_array(j) < 0)
            return -1;
        while ((more = json_scan_element(j)) == 1)
            if (skip_depth_(j, depth + 1) < 0)
                return -1;
        return more;
    case '"':
        return json_scan_string(j, NULL, 0);
    case 't':
        return literal_(j, "true");
    case 'f':
        return literal_(j, "false");
    case 'n':
        return literal_(j, "null");
    default: {
        double ignored;
        return json_scan_number(j, &ignored);
    }
    }
}

int json_scan_skip(struct json_scan *j) { return skip_depth_(j, 0); }

int json_scan_end(struct json_scan *j)
{
    if (!json_scan_ok(j))
        return -1;
    ws_(j);
    return j->p < j->end ? fail_(j, "text after the end of the value") : 0;
}
