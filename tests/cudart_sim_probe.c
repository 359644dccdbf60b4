// cudart_sim_probe.c: a plain CUDA runtime program, linked against the
// toolkit's real libcudart.so.13 (cudaMalloc@libcudart.so.13, ...), that
// tests/e2e/cudart_sim_abi.sh runs with LD_LIBRARY_PATH at the simulated
// one: it says which library answered, the devices it sees and whether a
// round trip through device memory kept the bytes. Exit 0 when every call
// succeeded and the bytes came back, 1 otherwise.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#define PROBE(call)                                                                \
    do {                                                                           \
        const cudaError_t err_ = (call);                                           \
        if (err_ != cudaSuccess) {                                                 \
            printf("FAILED %s: %s (%d)\n", #call, cudaGetErrorName(err_), (int)err_); \
            return 1;                                                              \
        }                                                                          \
    } while (0)

int main(void)
{
    Dl_info info;
    if (dladdr((void *)cudaGetDeviceCount, &info) && info.dli_fname)
        printf("library %s\n", info.dli_fname);
    int runtime = 0, count = 0;
    PROBE(cudaRuntimeGetVersion(&runtime));
    printf("runtime %d\n", runtime);
    PROBE(cudaGetDeviceCount(&count));
    printf("devices %d\n", count);
    for (int d = 0; d < count; d++) {
        struct cudaDeviceProp p;
        char bus[32];
        PROBE(cudaGetDeviceProperties(&p, d));
        PROBE(cudaDeviceGetPCIBusId(bus, sizeof bus, d));
        printf("device %d name %s bus %s memory %zu\n", d, p.name, bus, p.totalGlobalMem);
    }
    // a round trip on the last device, through a stream and pinned memory
    char want[4096], *host = NULL, *dev = NULL;
    for (size_t i = 0; i < sizeof want; i++)
        want[i] = (char)(i * 13 + 1);
    cudaStream_t s;
    PROBE(cudaSetDevice(count - 1));
    PROBE(cudaStreamCreate(&s));
    PROBE(cudaMalloc((void **)&dev, sizeof want));
    PROBE(cudaMallocHost((void **)&host, sizeof want));
    PROBE(cudaMemcpyAsync(dev, want, sizeof want, cudaMemcpyHostToDevice, s));
    PROBE(cudaMemcpyAsync(host, dev, sizeof want, cudaMemcpyDeviceToHost, s));
    PROBE(cudaStreamSynchronize(s));
    struct cudaPointerAttributes a;
    PROBE(cudaPointerGetAttributes(&a, dev));
    const int same = !memcmp(host, want, sizeof want);
    printf("round trip %s, pointer type %d on device %d\n", same ? "exact" : "WRONG", (int)a.type,
           a.device);
    PROBE(cudaFreeHost(host));
    PROBE(cudaFree(dev));
    PROBE(cudaStreamDestroy(s));
    return same && a.type == cudaMemoryTypeDevice && a.device == count - 1 ? 0 : 1;
}
