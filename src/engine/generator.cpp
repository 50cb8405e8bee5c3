#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "ignis/error.h"

namespace ignis::engine {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

void check_options(const GenerateOptions& o) {
  constexpr const char* where = "generate";
  check_arg(o.max_new_tokens >= 0, where, "max_new_tokens", ">= 0", o.max_new_tokens);
  check_arg(std::isfinite(o.temperature) && o.temperature >= 0.0, where, "temperature", "a finite value >= 0",
            o.temperature);
  check_arg(o.top_k >= 0, where, "top_k", ">= 0 (0 keeps every token)", o.top_k);
  check_arg(o.top_p > 0.0 && o.top_p <= 1.0, where, "top_p", "a value in (0, 1]", o.top_p);
}

void fill_intervals(GenerationStats& stats, const std::vector<Clock::time_point>& stamps) {
  if (stamps.size() < 2) return;
  std::vector<double> gaps;
  for (std::size_t i = 1; i < stamps.size(); ++i) gaps.push_back(seconds(stamps[i - 1], stamps[i]));
  double total = 0.0;
  for (double g : gaps) total += g;
  stats.tbt_mean_s = total / static_cast<double>(gaps.size());
  std::sort(gaps.begin(), gaps.end());
  const std::size_t mid = gaps.size() / 2;
  stats.tbt_median_s = gaps.size() % 2 ? gaps[mid] : 0.5 * (gaps[mid - 1] + gaps[mid]);
  if (stats.tbt_mean_s > 0.0) stats.decode_tokens_per_s = 1.0 / stats.tbt_mean_s;
}

}  // namespace

std::string stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::stop_token: return "stop token";
    case StopReason::max_tokens: return "max tokens";
    case StopReason::context_full: return "context full";
    case StopReason::callback: return "stopped";
  }
  return "unknown";
}

Generator::Generator(CausalLm& model, std::int64_t max_seq) : model_(model), cache_(model.make_cache(max_seq)) {}

void Generator::reset() {
  cache_.clear();
  cached_.clear();
}

GenerationResult Generator::generate(std::span<const std::int32_t> context, const GenerateOptions& options,
                                     const TokenCallback& on_token) {
  const Clock::time_point start = Clock::now();
  check_options(options);
  check_arg(!context.empty(), "generate", "context", "at least one token", 0);
  GenerationResult result;
  GenerationStats& stats = result.stats;
  stats.context_tokens = static_cast<std::int64_t>(context.size());
  if (static_cast<std::int64_t>(context.size()) > cache_.max_seq())
    throw Error("context length exceeded: " + std::to_string(context.size()) + " > " +
                std::to_string(cache_.max_seq()));

  // Keep the common prefix, but run at least the last context token: its logits are needed.
  std::size_t keep = 0;
  while (keep < cached_.size() && keep + 1 < context.size() && cached_[keep] == context[keep]) ++keep;
  cache_.truncate(static_cast<std::int64_t>(keep));
  cached_.resize(keep);
  stats.reused_tokens = static_cast<std::int64_t>(keep);

  const std::span<const std::int32_t> fresh = context.subspan(keep);
  stats.prefill_tokens = static_cast<std::int64_t>(fresh.size());
  SamplingParams params;
  params.temperature = options.temperature;
  params.top_k = options.top_k;
  params.top_p = options.top_p;
  params.seed = options.seed;
  // The prefill's forward samples the first token too (on CUDA only the id leaves the GPU).
  const Clock::time_point prefill_start = Clock::now();
  std::int32_t id = model_.forward_sample(fresh, cache_, params);
  cached_.insert(cached_.end(), fresh.begin(), fresh.end());
  stats.prefill_s = seconds(prefill_start, Clock::now());
  if (stats.prefill_s > 0.0) stats.prefill_tokens_per_s = static_cast<double>(fresh.size()) / stats.prefill_s;

  std::vector<Clock::time_point> stamps;
  result.reason = StopReason::max_tokens;
  for (std::int64_t step = 0; step < options.max_new_tokens; ++step) {
    if (step > 0) {
      if (cache_.length() >= cache_.max_seq()) {
        result.reason = StopReason::context_full;
        break;
      }
      const std::int32_t last = result.tokens.back();
      params.step = static_cast<std::uint64_t>(step);
      id = model_.forward_sample(std::span<const std::int32_t>(&last, 1), cache_, params);
      cached_.push_back(last);
    }
    stamps.push_back(Clock::now());
    if (step == 0) stats.ttft_s = seconds(start, stamps.back());
    if (std::find(options.stop_ids.begin(), options.stop_ids.end(), id) != options.stop_ids.end()) {
      result.reason = StopReason::stop_token;
      break;
    }
    result.tokens.push_back(id);
    if (on_token && !on_token(id)) {
      result.reason = StopReason::callback;
      break;
    }
  }
  stats.generated_tokens = static_cast<std::int64_t>(result.tokens.size());
  fill_intervals(stats, stamps);
  return result;
}

}  // namespace ignis::engine
