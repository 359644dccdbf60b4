// devcoll_target.h: what devcoll_proto.h's protocol needs from the machine
// it runs on, for each target: a block's barrier (with an or of a flag),
// acquire/release loads and stores at system scope, a clock and a pause for
// waits, the claim and publication of the first error, a unit's copy. On
// a GPU (nvcc) they are PTX and CUDA intrinsics; on the simulated device
// (C) atomics, clock_gettime and sleeps. Included by devcoll_proto.h only.
#ifndef VGPU_DEVCOLL_TARGET_H
#define VGPU_DEVCOLL_TARGET_H

#ifdef __CUDACC__
struct dc_thread {
    int block, blocks, lane, lanes;
};
DC_FN int dc_sync_or(int x) { return __syncthreads_or(x); }
// Nothing: the block barrier then one lane's release store at system scope
// is cumulative over every lane's writes before the barrier (PTX memory
// model; vLLM's custom all-reduce relies on the same). A fence in each of
// 16384 threads a barrier would only cost.
DC_FN void dc_fence(void) {}
DC_FN uint64_t dc_load(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
DC_FN void dc_store(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
DC_FN uint64_t dc_volatile(const uint64_t *p) { return *(const volatile uint64_t *)p; }
DC_FN uint32_t dc_read_u32(const uint32_t *p) { return *(const volatile uint32_t *)p; }
DC_FN uint64_t dc_now_ns(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
DC_FN void dc_pause(unsigned spins)
{
    if (spins > 64)
        __nanosleep(256);
}
// Whether *fault went from 0 to error here (the first error wins).
DC_FN int dc_claim(uint32_t *fault, uint32_t error)
{
    return atomicCAS((unsigned int *)fault, 0u, error) == 0u;
}
DC_FN void dc_publish_u32(uint32_t *p, uint32_t v)
{
    __threadfence_system();
    *(volatile uint32_t *)p = v;
    __threadfence_system();
}
// A unit in the widest accesses both addresses allow (a user's all-gather
// block or offset need not be 16-byte aligned), else byte by byte.
DC_FN void dc_copy16(char *dst, const char *src, uint64_t bytes)
{
    const uintptr_t align = (uintptr_t)dst | (uintptr_t)src;
    if (bytes == DC_UNIT && align % 16 == 0) {
        *(uint4 *)dst = *(const uint4 *)src;
    } else if (bytes == DC_UNIT && align % 8 == 0) {
        ((uint64_t *)dst)[0] = ((const uint64_t *)src)[0];
        ((uint64_t *)dst)[1] = ((const uint64_t *)src)[1];
    } else if (bytes == DC_UNIT && align % 4 == 0) {
        for (int i = 0; i < 4; i++)
            ((uint32_t *)dst)[i] = ((const uint32_t *)src)[i];
    } else {
        for (uint64_t i = 0; i < bytes; i++)
            dst[i] = src[i];
    }
}
#else
struct dc_thread {
    int block, blocks, lane, lanes;
};
// One lane a block (the simulated device): nothing to wait for. A test that
// runs a block's lanes as threads brings its own (DC_BLOCK_SYNC_EXTERNAL:
// tests/test_devcoll_lanes.c).
#ifndef DC_BLOCK_SYNC_EXTERNAL
DC_FN int dc_sync_or(int x) { return x; }
#endif
DC_FN void dc_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
DC_FN uint64_t dc_load(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
DC_FN void dc_store(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
DC_FN uint64_t dc_volatile(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
DC_FN uint32_t dc_read_u32(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
DC_FN uint64_t dc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
// Ranks share cores on the simulated device: spin a little, then give the
// core away, then sleep.
DC_FN void dc_pause(unsigned spins)
{
    if (spins > 2000) {
        const struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    } else if (spins > 100) {
        sched_yield();
    }
}
DC_FN int dc_claim(uint32_t *fault, uint32_t error)
{
    uint32_t none = 0;
    return __atomic_compare_exchange_n(fault, &none, error, 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
}
DC_FN void dc_publish_u32(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
DC_FN void dc_copy16(char *dst, const char *src, uint64_t bytes) { memcpy(dst, src, bytes); }
#endif

#endif
