#pragma once
// 1-D bulk copies from global to shared memory by the copy engine (cp.async.bulk, sm_90) and the
// mbarriers that say when their bytes have landed. One thread issues a whole contiguous range, so
// a block keeps many kilobytes in flight without a load instruction per thread and per 16 bytes.
// Device code for sm_90 only: callers guard their use with __CUDA_ARCH__ >= 900.

namespace ignis::cuda {

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// An mbarrier completing a phase when `arrivals` threads have arrived and every byte they announced
// has landed. The init fence makes the initialised barrier visible to the copy engine; the caller
// then synchronises the block before anyone uses it.
__device__ __forceinline__ void init_landing_barrier(unsigned long long* barrier, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(barrier)), "r"(arrivals) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// This thread's arrival on the barrier's current phase, announcing `bytes` to come from bulk copies.
__device__ __forceinline__ void expect_bytes(unsigned long long* barrier, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
}

// Orders this thread's (and, after a block barrier, the block's) earlier ordinary accesses of
// shared memory before the copy engine's writes of the bulk copies it issues next.
__device__ __forceinline__ void fence_before_bulk_copies() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from src to dst; their landing
// counts against `barrier`'s announced bytes. Call fence_before_bulk_copies first when dst was read.
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, unsigned bytes,
                                                    unsigned long long* barrier) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(barrier))
               : "memory");
}

// Waits until the barrier's phase of parity `parity` (0 for its first phase, then alternating) has
// completed.
__device__ __forceinline__ void wait_landed(unsigned long long* barrier, unsigned parity) {
  const unsigned address = shared_address(barrier);
  unsigned done = 0;
  while (!done) {
    asm volatile(
        "{\n"
        ".reg .pred landed;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 landed, [%1], %2;\n"
        "selp.u32 %0, 1, 0, landed;\n"
        "}\n"
        : "=r"(done)
        : "r"(address), "r"(parity)
        : "memory");
  }
}

}  // namespace ignis::cuda
