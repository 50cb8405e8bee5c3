#include "engine/run_summary.h"

#include <algorithm>
#include <vector>

#include "ignis/error.h"

namespace ignis::engine {
namespace {

// The median of one field over the runs (the mean of the middle two for an even count).
double median_of(std::span<const GenerationStats> runs, double GenerationStats::*field) {
  std::vector<double> values;
  values.reserve(runs.size());
  for (const GenerationStats& s : runs) values.push_back(s.*field);
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

}  // namespace

RunSummary summarize_runs(std::span<const GenerationStats> runs) {
  check_arg(!runs.empty(), "summarize_runs", "runs", "at least one", runs.size());
  RunSummary r;
  r.median = runs.front();
  for (double GenerationStats::*field :
       {&GenerationStats::prefill_s, &GenerationStats::ttft_s, &GenerationStats::tbt_mean_s,
        &GenerationStats::tbt_median_s, &GenerationStats::prefill_tokens_per_s, &GenerationStats::decode_tokens_per_s})
    r.median.*field = median_of(runs, field);
  const auto [lo, hi] = std::minmax_element(runs.begin(), runs.end(), [](const auto& a, const auto& b) {
    return a.ttft_s < b.ttft_s;
  });
  r.ttft_min_s = lo->ttft_s;
  r.ttft_max_s = hi->ttft_s;
  return r;
}

}  // namespace ignis::engine
