// sim_error.c: the simulated runtime's errors: each thread's last error and
// the names and texts of the codes it returns (CUDA's own words).
#include "sim_internal.h"

// Every code the simulation returns: its name and CUDA's message for it.
#define SIM_ERRORS(X)                                                                      \
    X(cudaSuccess, "no error")                                                             \
    X(cudaErrorInvalidValue, "invalid argument")                                           \
    X(cudaErrorMemoryAllocation, "out of memory")                                          \
    X(cudaErrorInitializationError, "initialization error")                                \
    X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                \
    X(cudaErrorInsufficientDriver,                                                         \
      "CUDA driver version is insufficient for CUDA runtime version")                      \
    X(cudaErrorDevicesUnavailable, "CUDA-capable device(s) is/are busy or unavailable")    \
    X(cudaErrorNoDevice, "no CUDA-capable device is detected")                             \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                                    \
    X(cudaErrorInvalidResourceHandle, "invalid resource handle")                           \
    X(cudaErrorNotReady, "device not ready")                                               \
    X(cudaErrorLaunchFailure, "unspecified launch failure")                                \
    X(cudaErrorNotSupported, "operation not supported")                                    \
    X(cudaErrorUnknown, "unknown error")

#define SIM_UNRECOGNIZED "unrecognized error code" // what CUDA says of a code it does not know

static __thread cudaError_t last_error_ = cudaSuccess; // this thread's, until read

cudaError_t sim_return(cudaError_t err)
{
    if (err != cudaSuccess && err != cudaErrorNotReady)
        last_error_ = err;
    return err;
}

cudaError_t cudaGetLastError(void)
{
    const cudaError_t err = last_error_;
    last_error_ = cudaSuccess;
    return err;
}

cudaError_t cudaPeekAtLastError(void) { return last_error_; }

const char *cudaGetErrorName(cudaError_t error)
{
    switch (error) {
#define SIM_NAME_(code, text) \
    case code:                \
        return #code;
        SIM_ERRORS(SIM_NAME_)
#undef SIM_NAME_
    default:
        return SIM_UNRECOGNIZED;
    }
}

const char *cudaGetErrorString(cudaError_t error)
{
    switch (error) {
#define SIM_TEXT_(code, text) \
    case code:                \
        return text;
        SIM_ERRORS(SIM_TEXT_)
#undef SIM_TEXT_
    default:
        return SIM_UNRECOGNIZED;
    }
}
