// json_scan.h: a small pull reader of JSON text held in memory, enough for
// vgpu-project to walk a Chrome trace-event file of any size without
// building a tree: objects and arrays are walked member by member, strings
// and numbers read in place, anything else skipped (and checked). The first
// error stops the walk and is kept with its byte offset.
#ifndef VGPU_JSON_SCAN_H
#define VGPU_JSON_SCAN_H

#include <stddef.h>

struct json_scan {
    const char *text, *p, *end;
    int fresh;     // just inside '{' or '[': the first item needs no comma
    char err[160]; // the first error ("" while none), with its byte offset
};

void json_scan_init(struct json_scan *j, const char *text, size_t bytes);
// 1 while j has no error.
int json_scan_ok(const struct json_scan *j);
// Objects: json_scan_object(j) enters one (0, or -1 on an error); then each
// json_scan_member(j, key, key_bytes) returns 1 with the member's key read
// and j at its value (which the caller must read or skip), 0 at the end of
// the object (consumed), -1 on an error.
int json_scan_object(struct json_scan *j);
int json_scan_member(struct json_scan *j, char *key, size_t key_bytes);
// Arrays: the same with json_scan_element (1: j at the next element).
int json_scan_array(struct json_scan *j);
int json_scan_element(struct json_scan *j);
// A string into buf (cut to fit; \u escapes other than ASCII read as '?'),
// a number, or any value skipped. 0, or -1 on an error (a value of another
// type is one).
int json_scan_string(struct json_scan *j, char *buf, size_t bytes);
int json_scan_number(struct json_scan *j, double *value);
int json_scan_skip(struct json_scan *j);
// After the top-level value: 0 when only white space is left.
int json_scan_end(struct json_scan *j);

#endif
