// summarize_runs: medians by hand over odd and even run counts, the TTFT spread, and an empty list.
#include <gtest/gtest.h>

#include <vector>

#include "engine/run_summary.h"
#include "model/error_text.h"

namespace ignis::engine {
namespace {

GenerationStats stats(double ttft_s, double tbt_median_s, std::int64_t prefill_tokens = 64) {
  GenerationStats s;
  s.prefill_tokens = prefill_tokens;
  s.generated_tokens = 16;
  s.ttft_s = ttft_s;
  s.prefill_s = ttft_s - 0.001;
  s.tbt_median_s = tbt_median_s;
  s.tbt_mean_s = tbt_median_s + 0.0001;
  s.prefill_tokens_per_s = static_cast<double>(prefill_tokens) / s.prefill_s;
  s.decode_tokens_per_s = 1.0 / s.tbt_mean_s;
  return s;
}

TEST(RunSummary, OneRunIsItsOwnSummary) {
  const std::vector<GenerationStats> runs = {stats(0.0031, 0.00072)};
  const RunSummary r = summarize_runs(runs);
  EXPECT_EQ(r.median.ttft_s, 0.0031);
  EXPECT_EQ(r.median.tbt_median_s, 0.00072);
  EXPECT_EQ(r.ttft_min_s, 0.0031);
  EXPECT_EQ(r.ttft_max_s, 0.0031);
  EXPECT_EQ(r.median.prefill_tokens, 64);
}

TEST(RunSummary, AnOddCountTakesTheMiddleRunOfEachTimingApart) {
  // TTFT sorted 2.9, 3.2, 3.9 ms; TBT sorted 0.70, 0.72, 0.73 ms, from different runs.
  const std::vector<GenerationStats> runs = {stats(0.0039, 0.00070), stats(0.0029, 0.00073),
                                             stats(0.0032, 0.00072)};
  const RunSummary r = summarize_runs(runs);
  EXPECT_DOUBLE_EQ(r.median.ttft_s, 0.0032);
  EXPECT_DOUBLE_EQ(r.median.prefill_s, 0.0022);
  EXPECT_DOUBLE_EQ(r.median.tbt_median_s, 0.00072);
  EXPECT_DOUBLE_EQ(r.median.tbt_mean_s, 0.00082);  // each run's mean is its median + 0.1 ms
  EXPECT_DOUBLE_EQ(r.median.decode_tokens_per_s, 1.0 / 0.00082);
  EXPECT_DOUBLE_EQ(r.ttft_min_s, 0.0029);
  EXPECT_DOUBLE_EQ(r.ttft_max_s, 0.0039);
}

TEST(RunSummary, AnEvenCountAveragesTheMiddleTwo) {
  const std::vector<GenerationStats> runs = {stats(0.004, 0.0008), stats(0.002, 0.0006), stats(0.003, 0.0007),
                                             stats(0.001, 0.0009)};
  const RunSummary r = summarize_runs(runs);
  EXPECT_DOUBLE_EQ(r.median.ttft_s, 0.0025);
  EXPECT_DOUBLE_EQ(r.median.tbt_median_s, 0.00075);
  EXPECT_DOUBLE_EQ(r.ttft_min_s, 0.001);
  EXPECT_DOUBLE_EQ(r.ttft_max_s, 0.004);
}

TEST(RunSummary, RejectsAnEmptyList) {
  EXPECT_ERROR_CONTAINS(summarize_runs({}), "summarize_runs: runs: expected at least one, got 0");
}

}  // namespace
}  // namespace ignis::engine
