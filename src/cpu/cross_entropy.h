#pragma once
// The CPU cross-entropy: fp32 storage and accumulation. Targets are checked by the caller.
#include <cstdint>

namespace ignis::cpu {

// logits: [n, vocab], targets: [n] (pad_id or in [0, vocab)) -> loss: [1] mean over non-pad rows,
// dlogits: [n, vocab] or null, row_loss: [n] or null.
template <class Id>
void cross_entropy_f32(const float* logits, const Id* targets, std::int64_t n, std::int64_t vocab,
                       std::int64_t pad_id, float* loss, float* dlogits, float* row_loss);

}  // namespace ignis::cpu
