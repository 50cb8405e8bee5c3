#include "cpu/sampling.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

namespace ignis::cpu {
namespace {

using sampling::exp2_table;
using sampling::order_key;

// Rank order: larger key first, lower index first among equal keys.
struct RanksBefore {
  const std::uint32_t* keys;
  bool operator()(std::int32_t a, std::int32_t b) const { return keys[a] != keys[b] ? keys[a] > keys[b] : a < b; }
};

// One row's working state: keys, the surviving candidates and their weights.
class Row {
 public:
  // x: [n], one row of logits.
  Row(const float* x, std::int64_t n) : x_(x), n_(n), keys_(n), candidates_(n) {
    for (std::int64_t i = 0; i < n; ++i) keys_[i] = order_key(x[i]);
    std::iota(candidates_.begin(), candidates_.end(), 0);
  }

  std::int32_t argmax() const {
    std::int32_t best = 0;
    for (std::int64_t i = 1; i < n_; ++i)
      if (keys_[i] > keys_[best]) best = static_cast<std::int32_t>(i);
    return best;
  }

  void keep_top_k(std::int64_t k) {
    if (k <= 0 || k >= static_cast<std::int64_t>(candidates_.size())) return;
    std::nth_element(candidates_.begin(), candidates_.begin() + k, candidates_.end(), RanksBefore{keys_.data()});
    candidates_.resize(k);
  }

  // Weights of the candidates relative to the row max (which always survives top-k).
  void weigh(double scale, int bits) {
    const float max = x_[argmax()];
    weights_.resize(candidates_.size());
    for (std::size_t c = 0; c < candidates_.size(); ++c)
      weights_[c] = sampling::weight_from_exponent(sampling::weight_exponent(max, x_[candidates_[c]], scale),
                                                   exp2_table(), bits);
  }

  std::uint64_t total() const {
    std::uint64_t sum = 0;
    for (std::uint64_t w : weights_) sum += w;
    return sum;
  }

  // Keeps the shortest rank-order prefix of the candidates whose weight reaches the target. The prefix
  // is found by selecting and sorting a growing head of the rank order (256 candidates, then 4x as many
  // each round) instead of sorting every candidate: a sort of the 49152-token vocabulary had been most of
  // a CPU top-p sample (4.2 of 4.3 ms).
  void keep_top_p(std::uint64_t p_fixed) {
    const std::uint64_t total = this->total();
    if (p_fixed >= sampling::kTopPOff || total == 0) return;
    std::vector<std::size_t> by_rank(candidates_.size());
    std::iota(by_rank.begin(), by_rank.end(), 0);
    const auto ranks_before = [this](std::size_t a, std::size_t b) {
      return RanksBefore{keys_.data()}(candidates_[a], candidates_[b]);
    };
    const std::uint64_t target = sampling::top_p_target(total, p_fixed);
    std::uint64_t cum = 0;
    std::size_t kept = 0, sorted = 0;
    for (std::size_t head = 256; cum < target; head *= 4) {
      const auto end = by_rank.begin() + static_cast<std::ptrdiff_t>(std::min(head, by_rank.size()));
      std::nth_element(by_rank.begin() + static_cast<std::ptrdiff_t>(sorted), end, by_rank.end(), ranks_before);
      std::sort(by_rank.begin() + static_cast<std::ptrdiff_t>(sorted), end, ranks_before);
      sorted = static_cast<std::size_t>(end - by_rank.begin());
      while (kept < sorted && cum < target) cum += weights_[by_rank[kept++]];
      if (sorted == by_rank.size()) break;
    }
    std::vector<std::int32_t> candidates(kept);
    std::vector<std::uint64_t> weights(kept);
    for (std::size_t r = 0; r < kept; ++r) {
      candidates[r] = candidates_[by_rank[r]];
      weights[r] = weights_[by_rank[r]];
    }
    candidates_ = std::move(candidates);
    weights_ = std::move(weights);
  }

  // The first candidate in index order whose inclusive cumulative weight exceeds the threshold.
  // Candidates come in index order (no cut), rank order (top-p) or nth_element's (top-k): a short list
  // is sorted by index; a long one is scattered into a row of weights (0 where dropped), which adds
  // nothing to the running sum, and scanned.
  std::int32_t draw(std::uint64_t bits) {
    const std::uint64_t total = this->total();
    if (total == 0) return argmax();
    const std::uint64_t threshold = sampling::draw_threshold(bits, total);
    const std::size_t m = candidates_.size();
    std::uint64_t cum = 0;
    if (std::is_sorted(candidates_.begin(), candidates_.end())) {
      for (std::size_t c = 0; c < m; ++c)
        if ((cum += weights_[c]) > threshold) return candidates_[c];
    } else if (m * 16 < static_cast<std::size_t>(n_)) {
      std::vector<std::size_t> by_index(m);
      std::iota(by_index.begin(), by_index.end(), 0);
      std::sort(by_index.begin(), by_index.end(),
                [this](std::size_t a, std::size_t b) { return candidates_[a] < candidates_[b]; });
      for (std::size_t c : by_index)
        if ((cum += weights_[c]) > threshold) return candidates_[c];
    } else {
      std::vector<std::uint64_t> row(static_cast<std::size_t>(n_), 0);
      for (std::size_t c = 0; c < m; ++c) row[candidates_[c]] = weights_[c];
      for (std::int64_t i = 0; i < n_; ++i)
        if ((cum += row[i]) > threshold) return static_cast<std::int32_t>(i);
    }
    return argmax();  // unreachable: threshold < total
  }

  // Writes x where a candidate survives, -inf elsewhere; y may be x.
  void write_mask(float* y) const {
    std::vector<float> kept(candidates_.size());
    for (std::size_t c = 0; c < kept.size(); ++c) kept[c] = x_[candidates_[c]];
    std::fill(y, y + n_, -std::numeric_limits<float>::infinity());
    for (std::size_t c = 0; c < kept.size(); ++c) y[candidates_[c]] = kept[c];
  }

 private:
  const float* x_;
  std::int64_t n_;
  std::vector<std::uint32_t> keys_;
  std::vector<std::int32_t> candidates_;
  std::vector<std::uint64_t> weights_;
};

}  // namespace

void top_k_mask_f32(const float* x, float* y, std::int64_t rows, std::int64_t vocab, std::int64_t k) {
  for (std::int64_t r = 0; r < rows; ++r) {
    Row row(x + r * vocab, vocab);
    row.keep_top_k(k);
    row.write_mask(y + r * vocab);
  }
}

void top_p_mask_f32(const float* x, float* y, std::int64_t rows, std::int64_t vocab, std::uint64_t p_fixed) {
  for (std::int64_t r = 0; r < rows; ++r) {
    Row row(x + r * vocab, vocab);
    row.weigh(sampling::kLog2e, sampling::weight_bits(vocab));
    row.keep_top_p(p_fixed);
    row.write_mask(y + r * vocab);
  }
}

void sample_f32(const float* logits, std::int32_t* ids, std::int64_t rows, std::int64_t vocab,
                const sampling::Plan& plan) {
  for (std::int64_t r = 0; r < rows; ++r) {
    Row row(logits + r * vocab, vocab);
    if (plan.greedy) {
      ids[r] = row.argmax();
      continue;
    }
    row.keep_top_k(plan.top_k);
    row.weigh(plan.scale, plan.bits);
    row.keep_top_p(plan.p_fixed);
    ids[r] = row.draw(sampling::random_bits(plan.seed, plan.step, static_cast<std::uint64_t>(r)));
  }
}

}  // namespace ignis::cpu
