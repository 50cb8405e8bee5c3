#pragma once
// The CPU attention backend: fp32 causal grouped-query attention over the cache, one pass over
// the keys with an online softmax (a running max and sum, rescaled once per block of keys),
// with the (sequence, head, query) rows split across the thread pool.
#include <memory>

#include "engine/attention_backend.h"
#include "engine/thread_pool.h"

namespace ignis::engine {

// `pool` must outlive the backend.
std::unique_ptr<AttentionBackend> make_cpu_attention(ThreadPool& pool);

}  // namespace ignis::engine
