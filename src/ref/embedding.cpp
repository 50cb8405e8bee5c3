#include "ref/embedding.h"

#include "ops/index_check.h"

namespace ignis::ref {

// ids: [n].
static void check_ids(std::span<const std::int64_t> ids, std::int64_t vocab, const char* where) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab) ops::fail_bad_index(where, "ids", static_cast<std::int64_t>(i), ids[i], vocab);
}

std::vector<double> embedding_forward(std::span<const double> table, std::span<const std::int64_t> ids,
                                      std::int64_t vocab, std::int64_t dim) {
  check_ids(ids, vocab, "embedding_forward");
  std::vector<double> out(ids.size() * dim);
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::int64_t d = 0; d < dim; ++d) out[i * dim + d] = table[ids[i] * dim + d];
  return out;
}

std::vector<double> embedding_backward(std::span<const double> dout, std::span<const std::int64_t> ids,
                                       std::int64_t vocab, std::int64_t dim) {
  check_ids(ids, vocab, "embedding_backward");
  std::vector<double> dtable(vocab * dim, 0.0);
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (std::int64_t d = 0; d < dim; ++d) dtable[ids[i] * dim + d] += dout[i * dim + d];
  return dtable;
}

}  // namespace ignis::ref
