#pragma once
// Reference cross-entropy of logits against integer targets, forward and backward together:
// plain loops in double precision.
#include <cstdint>
#include <span>
#include <vector>

namespace ignis::ref {

struct CrossEntropyResult {
  double loss = 0.0;             // mean over non-pad rows of logsumexp(row) - row[target]; 0 when all are pad
  std::vector<double> dlogits;   // [n, vocab]: d loss / d logits
  std::vector<double> row_loss;  // [n]: logsumexp(row) - row[target], 0 for pad rows
  std::int64_t count = 0;        // rows whose target is not pad_id
};

// logits: [n, vocab], targets: [n]. Rows whose target equals pad_id take no part in the loss and get
// zero gradients. Any other target outside [0, vocab) throws ignis::Error naming it.
CrossEntropyResult cross_entropy(std::span<const double> logits, std::span<const std::int64_t> targets,
                                 std::int64_t vocab, std::int64_t pad_id);

}  // namespace ignis::ref
