#pragma once
// Checks shared by the ops that take integer indices (embedding ids, cross-entropy targets).
#include <cstdint>
#include <optional>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::ops {

// indices: [n] i32 or i64, contiguous.
void check_index_tensor(const Tensor& indices, const char* where, const char* name);

// indices[i] of a host tensor of i32 or i64.
std::int64_t index_at(const Tensor& indices, std::int64_t i);

// "<where>: <name>[position]: expected an index in [0, bound), got <index>".
[[noreturn]] void fail_bad_index(const char* where, const char* name, std::int64_t position, std::int64_t index,
                                 std::int64_t bound);

// Throws fail_bad_index for the first entry that is neither `skip` nor in [0, bound), if any.
// `indices` may live on a device: it is then copied to the host first.
void check_indices(const Tensor& indices, std::int64_t bound, std::optional<std::int64_t> skip, const char* where,
                   const char* name);

// The record of a deferred index check (embedding_forward_deferred, cross_entropy_deferred):
// flag: [3] i64 {position, index, bound}, position -1 meaning none, on `device`.
void check_index_flag(const Tensor& flag, Device device, const char* where);
// Sets position to -1 (stream-ordered on a device).
void clear_index_flag(const Tensor& flag, Stream stream);
// Waits for `stream` (on a device), then throws fail_bad_index(where, name, ...) if an index was recorded.
void throw_if_flagged(const Tensor& flag, const char* where, const char* name, Stream stream);

}  // namespace ignis::ops
