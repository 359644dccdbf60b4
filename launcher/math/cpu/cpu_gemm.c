// cpu_gemm.c: cpu_gemm on the library chosen at configure time
// (VGPU_BLAS_OPENBLAS, VGPU_BLAS_BLIS or VGPU_BLAS_DNNL).
#include "cpu_gemm.h"

#include <stdio.h>

#include "log.h"

#if defined(VGPU_BLAS_DNNL)
// ---- oneDNN: dnnl_sgemm is row-major; Debian builds it on OpenMP ----
#include <dnnl.h>
#include <omp.h>

const char *cpu_gemm_library(void)
{
    static char name[64];
    const dnnl_version_t *v = dnnl_version();
    snprintf(name, sizeof name, "oneDNN %d.%d.%d (dnnl_sgemm)", v->major, v->minor, v->patch);
    return name;
}

void cpu_gemm_set_threads(int threads) { omp_set_num_threads(threads); }

int cpu_gemm_ld(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a,
                                  lda, b, ldb, beta, c, ldc);
    if (st != dnnl_success) {
        log_error("dnnl_sgemm(%c%c, m=%d n=%d k=%d) failed: status %d", trans_a ? 'T' : 'N',
                  trans_b ? 'T' : 'N', m, n, k, (int)st);
        return VGPU_EINVAL;
    }
    return 0;
}

#elif defined(VGPU_BLAS_BLIS)
// ---- BLIS: the typed API takes both strides, so a transpose is a stride swap ----
#include <blis.h>

const char *cpu_gemm_library(void)
{
    static char name[64];
    snprintf(name, sizeof name, "BLIS %s (%s kernels)", bli_info_get_version_str(),
             bli_arch_string(bli_arch_query_id()));
    return name;
}

void cpu_gemm_set_threads(int threads) { bli_thread_set_num_threads(threads); }

int cpu_gemm_ld(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    // op(a)[i,p] lives at a[i*rs + p*cs].
    inc_t rs_a = trans_a ? 1 : lda, cs_a = trans_a ? lda : 1;
    inc_t rs_b = trans_b ? 1 : ldb, cs_b = trans_b ? ldb : 1;
    bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, (float *)a, rs_a, cs_a,
              (float *)b, rs_b, cs_b, &beta, c, ldc, 1);
    return 0;
}

#else
// ---- OpenBLAS (the default and the fallback) ----
#include <cblas.h>

// OpenBLAS's own controls (declared in its cblas.h, not in every CBLAS).
void openblas_set_num_threads(int num_threads);
char *openblas_get_corename(void);
char *openblas_get_config(void);

const char *cpu_gemm_library(void)
{
    static char name[96];
    snprintf(name, sizeof name, "%s (%s kernels)", openblas_get_config(), openblas_get_corename());
    return name;
}

void cpu_gemm_set_threads(int threads) { openblas_set_num_threads(threads); }

int cpu_gemm_ld(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return 0;
}
#endif

int cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
             const float *b, float beta, float *c)
{
    return cpu_gemm_ld(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n,
                       beta, c, n);
}
