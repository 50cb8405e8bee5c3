#pragma once
// Embedding lookup (a row gather) and its gradient (a scatter-add).
#include "ignis/stream.h"
#include "ignis/tensor.h"

namespace ignis {

// `dtype` is the table's: f32 on the host; f32, f16 or bf16 on CUDA. Ids are i32 or i64.
bool embedding_supported(Device device, DType dtype);

// out[i] = table[ids[i]]. table: [vocab, dim], ids: [n], out: [n, dim] (table's dtype), all contiguous
// on one device. An id outside [0, vocab) throws ignis::Error naming the id, its position and vocab.
// On CUDA the kernel never reads a bad id's row (it writes zeros there) and flags it on the device;
// this entry point then waits for the stream to read the flag: one host synchronization per call.
void embedding_forward(const Tensor& table, const Tensor& ids, const Tensor& out, Stream stream = {});

// The same without the synchronization, for a decode loop that must not wait on the GPU: a bad id
// gives a zero row and is recorded in `flag` (the first one recorded wins), to be read later by
// embedding_check_flag. flag: [3] i64 on the ids' device, {position, id, vocab}, position -1 meaning
// none; embedding_clear_flag sets it, and it may collect any number of calls before a check.
void embedding_forward_deferred(const Tensor& table, const Tensor& ids, const Tensor& out, const Tensor& flag,
                                Stream stream = {});
void embedding_clear_flag(const Tensor& flag, Stream stream = {});
// Waits for `stream`, then throws the error embedding_forward would have thrown if a bad id was recorded.
void embedding_check_flag(const Tensor& flag, Stream stream = {});

// dtable[v] = sum of dout[i] over the i with ids[i] = v (0 where no id names v); dtable is
// overwritten. dout: [n, dim], ids: [n], dtable: [vocab, dim] (dout's dtype). Bad ids throw as in
// the forward (after a synchronization). On CUDA the sums run in fp32 in ascending i for each row
// (ids are sorted first), so the result is deterministic: no floating-point atomics.
void embedding_backward(const Tensor& dout, const Tensor& ids, const Tensor& dtable, Stream stream = {});

}  // namespace ignis
