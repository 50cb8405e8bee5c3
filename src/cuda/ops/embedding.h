#pragma once
// CUDA embedding launchers. Arguments are validated by the dispatcher in src/ops/embedding.cpp;
// ids are not: kernels check each one, never read through a bad one, and record it in a flag
// (src/cuda/common/index_flag.cuh).
#include <cstdint>

#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis::cuda {

// table: [vocab, dim], ids: [n] i32/i64, out: [n, dim]; a bad id's row is zeroed and recorded in
// flag: device long long[3]. Does not synchronize.
void embedding_forward(const Tensor& table, const Tensor& ids, const Tensor& out, long long* flag, Stream stream);
// The same with a scratch flag; synchronizes and returns whether an id was out of range.
bool embedding_forward_checked(const Tensor& table, const Tensor& ids, const Tensor& out, Stream stream);
// dout: [n, dim], ids: [n], dtable: [vocab, dim], overwritten. Synchronizes and returns whether an
// id was out of range (its contribution is then dropped).
bool embedding_backward(const Tensor& dout, const Tensor& ids, const Tensor& dtable, Stream stream);

// flag: [3] i64 on the device.
void clear_index_flag(const Tensor& flag, Stream stream);
// Waits for `stream`; returns {position, id, vocab}, position -1 when nothing was recorded.
void read_index_flag(const Tensor& flag, std::int64_t (&record)[3], Stream stream);

}  // namespace ignis::cuda
