#pragma once
// Shared memory as a way to cap the blocks an SM holds: host arithmetic, kept apart from the CUDA
// code so the host tests check it on any machine. A block that asks for an equal share of the SM's
// shared memory leaves no room for one more, whatever it uses of it.
namespace ignis::cuda {

// Shared memory is handed out in units of this many bytes.
constexpr long long kSmemGranule = 128;

constexpr long long round_to_granule(long long bytes) {
  return (bytes + kSmemGranule - 1) / kSmemGranule * kSmemGranule;
}

// The most dynamic shared memory a block can ask for while `blocks` of them still fit an SM of
// `sm_bytes`, with `reserved` bytes taken by the system for each block and `static_bytes` of the
// kernel's own; whether the runtime rounds the static and dynamic parts to granules together or
// apart, `blocks` fit. It leaves no room for one more while blocks (blocks + 1) < sm_bytes / (2
// granules): up to 29 blocks for 228 KB. May be negative: `blocks` do not fit even without it.
constexpr long long smem_for_blocks_an_sm(long long blocks, long long sm_bytes, long long reserved,
                                          long long static_bytes) {
  return (sm_bytes / blocks - reserved) / kSmemGranule * kSmemGranule - round_to_granule(static_bytes);
}

}  // namespace ignis::cuda
