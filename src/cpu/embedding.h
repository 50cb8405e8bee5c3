#pragma once
// The engine's CPU embedding lookup (and its gradient): fp32 storage. Ids are checked by the caller.
#include <cstdint>

namespace ignis::cpu {

// table: [vocab, dim], ids: [n] in [0, vocab) -> out: [n, dim].
template <class Id>
void embedding_forward_f32(const float* table, const Id* ids, float* out, std::int64_t n, std::int64_t dim);
// dout: [n, dim], ids: [n] in [0, vocab) -> dtable: [vocab, dim], overwritten.
template <class Id>
void embedding_backward_f32(const float* dout, const Id* ids, float* dtable, std::int64_t n, std::int64_t vocab,
                            std::int64_t dim);

}  // namespace ignis::cpu
