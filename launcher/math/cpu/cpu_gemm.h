// cpu_gemm.h: the CPU backend's single-precision GEMM behind one interface,
// whichever library the build chose (CMake VGPU_CPU_BLAS: openblas, blis or
// dnnl; scripts/bench_gemm.sh measures them on the trainer's shapes).
#ifndef VGPU_CPU_GEMM_H
#define VGPU_CPU_GEMM_H

// Library name, version and kernel set, e.g. "OpenBLAS 0.3.21 (SkylakeX kernels)".
const char *cpu_gemm_library(void);

// Threads the library may use for calls from this process (devices.cpu_threads).
void cpu_gemm_set_threads(int threads);

// Row-major c[m,n] = alpha * op(a) @ op(b) + beta * c, with op(a) [m,k] and
// op(b) [k,n]; a is stored [m,k] ([k,m] when trans_a), b [k,n] ([n,k] when
// trans_b). Host pointers. Returns 0, or VGPU_EINVAL if the library refused.
int cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
             const float *b, float beta, float *c);

// cpu_gemm on strided matrices: row i of a as stored starts at a + i * lda
// (likewise b, c), so a GEMM can read a head's columns out of a wider tensor
// (the transformer's attention). beta 0 overwrites c whatever it held.
int cpu_gemm_ld(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc);

#endif
