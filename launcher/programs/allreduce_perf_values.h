// allreduce_perf_values.h: vgpu_allreduce_perf's data: each rank's input
// and the exact result any order of reduction must give (every type and
// operation of vgpu.h), and the deterministic all-reduce's partials.
#ifndef VGPU_ALLREDUCE_PERF_VALUES_H
#define VGPU_ALLREDUCE_PERF_VALUES_H

#include <stddef.h>

#include <vgpu/vgpu.h>

// buf (host memory, count elements of t) = rank `rank`'s input for op.
void perf_fill(void *buf, size_t count, int rank, vgpu_datatype_t t, vgpu_op_t op);
// Whether element i of buf is what op over `size` ranks' inputs gives.
int perf_right(const void *buf, size_t i, int size, vgpu_datatype_t t, vgpu_op_t op);

// The deterministic all-reduce of `tree` partials: how many rank r holds
// (split as evenly as they go), rank `rank`'s partials back to back (count
// floats each), and element i of their sum.
int perf_tree_parts(int tree, int r, int size);
void perf_tree_fill(int tree, int rank, int size, float *host, size_t count);
float perf_expected_tree(int partials, size_t i);

#endif
