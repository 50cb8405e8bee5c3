#pragma once
// Reference embedding lookup and its gradient: plain loops in double precision.
#include <cstdint>
#include <span>
#include <vector>

namespace ignis::ref {

// table: [vocab, dim], ids: [n] -> out: [n, dim] with out[i] = table[ids[i]].
// An id outside [0, vocab) throws ignis::Error naming the id, its position and vocab.
std::vector<double> embedding_forward(std::span<const double> table, std::span<const std::int64_t> ids,
                                      std::int64_t vocab, std::int64_t dim);

// dout: [n, dim], ids: [n] -> dtable: [vocab, dim] with dtable[ids[i]] += dout[i]; rows no id
// names stay 0, rows of a repeated id accumulate.
std::vector<double> embedding_backward(std::span<const double> dout, std::span<const std::int64_t> ids,
                                       std::int64_t vocab, std::int64_t dim);

}  // namespace ignis::ref
