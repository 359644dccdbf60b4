// ref.h: the oracle of nccl_api_test: NCCL's 12 data types on the host, the
// rank-order reference reduction the library's contract gives, test inputs
// and an element-wise exact comparison.
#ifndef NCCL_REF_H
#define NCCL_REF_H

#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

// Reduction selector of the tests: ncclSum..ncclAvg, then REF_PREMUL.
enum { REF_PREMUL = ncclNumOps, REF_NUM_OPS };

size_t ref_type_size(ncclDataType_t type);
const char *ref_type_name(ncclDataType_t type);
const char *ref_op_name(int op);

// Conversions with round-to-nearest-even (fp8: saturating at the largest
// finite value, as the contract says).
uint16_t ref_float_to_half(float v);
float ref_half_to_float(uint16_t bits);
uint16_t ref_float_to_bf16(float v);
float ref_bf16_to_float(uint16_t bits);
uint8_t ref_float_to_e4m3(float v);
float ref_e4m3_to_float(uint8_t bits);
uint8_t ref_float_to_e5m2(float v);
float ref_e5m2_to_float(uint8_t bits);

// ref_store: element i of buf (of type) set to v (integers: truncated toward
// zero, then wrapped to the type's width; floats: rounded as above).
void ref_store(void *buf, ncclDataType_t type, size_t i, double v);
// ref_load: element i as a double (exact for every value the tests make).
double ref_load(const void *buf, ncclDataType_t type, size_t i);

// ref_fill: count small values that keep op exact in type (products of
// -1, 1, 2; sums of -3..3, or -1..1 for fp8; unsigned types non-negative),
// different per rank, element and seed.
void ref_fill(void *buf, ncclDataType_t type, int op, int rank, size_t count, unsigned seed);

// ref_reduce: out = ((in[0] op in[1]) op in[2]) ... op in[nranks-1], element
// by element in the type's own arithmetic (ref.c says how). scalars
// (REF_PREMUL only): each rank's pre-multiplier, already a value of the type.
void ref_reduce(void *out, const void *const *in, int nranks, size_t count, ncclDataType_t type,
                int op, const double *scalars);

// ref_compare: count elements of got against want, bit for bit. Returns the
// number that differ; the first is described in why (why_bytes long).
size_t ref_compare(const void *got, const void *want, size_t count, ncclDataType_t type, char *why,
                   size_t why_bytes);

// ref_hash: a small deterministic mix of three numbers (inputs' source).
uint32_t ref_hash(uint32_t a, uint32_t b, uint32_t c);

#endif
