#pragma once
// Several measured generations of one benchmark, summarized: each timing's median (a single prefill of a
// 135M model moves by a third from run to run on a shared host) and the spread of TTFT.
#include <span>

#include "engine/generator.h"

namespace ignis::engine {

struct RunSummary {
  GenerationStats median;  // each timing field the median over the runs; token counts of the first run
  double ttft_min_s = 0.0;
  double ttft_max_s = 0.0;
};

// runs: at least one run's stats (throws ignis::Error when empty).
RunSummary summarize_runs(std::span<const GenerationStats> runs);

}  // namespace ignis::engine
