// Embedding dispatcher: validates arguments, then runs the CPU or CUDA gather / scatter-add.
// Ids are checked on the host for CPU tensors; CUDA kernels check them on the device.
#include <algorithm>

#include "cpu/embedding.h"
#include "ignis/ops.h"
#include "ops/index_check.h"

#if IGNIS_WITH_CUDA
#include "cuda/ops/embedding.h"
#endif

namespace ignis {
namespace {

// Ids beyond int32 positions or a vocabulary beyond int32 would overflow the CUDA sort keys.
constexpr std::int64_t kMaxIndex = 2147483647;

// t: [vocab, dim].
void check_table(const Tensor& t, const char* where, const char* name) {
  check_dim(t, 2, where, name);
  check_contiguous(t, where, name);
  check_arg(embedding_supported(t.device(), t.dtype()), where, detail::lazy_concat(name, ".dtype on ", t.device()),
            t.device().is_cpu() ? "f32" : "f32, f16 or bf16", t.dtype());
  check_arg(t.size(0) <= kMaxIndex, where, detail::lazy_concat(name, ".shape[0]"), "at most 2^31 - 1", t.size(0));
}

// ids: [n], on like's device.
void check_ids(const Tensor& ids, const Tensor& like, const char* where) {
  ops::check_index_tensor(ids, where, "ids");
  check_device(ids, like.device(), where, "ids");
  check_arg(ids.size(0) <= kMaxIndex, where, "ids.shape[0]", "at most 2^31 - 1", ids.size(0));
}

// rows: [n, dim] with table's dtype and device.
void check_rows(const Tensor& rows, const Tensor& table, const Tensor& ids, const char* where, const char* name) {
  check_shape(rows, {ids.size(0), table.size(1)}, where, name);
  check_dtype(rows, table.dtype(), where, name);
  check_device(rows, table.device(), where, name);
  check_contiguous(rows, where, name);
}

// The checks every entry point shares; rows is out (forward) or dout (backward).
// table: [vocab, dim], ids: [n], rows: [n, dim].
void check_args(const Tensor& table, const Tensor& ids, const Tensor& rows, const char* where, const char* table_name,
                const char* rows_name) {
  check_table(table, where, table_name);
  check_ids(ids, table, where);
  check_rows(rows, table, ids, where, rows_name);
}

// table: [vocab, dim], ids: [n], out: [n, dim].
void gather_cpu(const Tensor& table, const Tensor& ids, const Tensor& out) {
  if (ids.dtype() == DType::i32)
    cpu::embedding_forward_f32(table.data_as<const float>(), ids.data_as<const std::int32_t>(), out.data_as<float>(),
                               ids.size(0), table.size(1));
  else
    cpu::embedding_forward_f32(table.data_as<const float>(), ids.data_as<const std::int64_t>(), out.data_as<float>(),
                               ids.size(0), table.size(1));
}

}  // namespace

bool embedding_supported(Device device, DType dtype) {
  if (device.is_cpu()) return dtype == DType::f32;
  return IGNIS_WITH_CUDA && (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16);
}

void embedding_forward(const Tensor& table, const Tensor& ids, const Tensor& out, Stream stream) {
  constexpr const char* where = "embedding_forward";
  check_args(table, ids, out, where, "table", "out");
  if (table.device().is_cpu()) {
    ops::check_indices(ids, table.size(0), std::nullopt, where, "ids");
    gather_cpu(table, ids, out);
    return;
  }
#if IGNIS_WITH_CUDA
  if (cuda::embedding_forward_checked(table, ids, out, stream))
    ops::check_indices(ids, table.size(0), std::nullopt, where, "ids");  // names the first bad id
#endif
  (void)stream;
}

void embedding_forward_deferred(const Tensor& table, const Tensor& ids, const Tensor& out, const Tensor& flag,
                                Stream stream) {
  constexpr const char* where = "embedding_forward_deferred";
  check_args(table, ids, out, where, "table", "out");
  ops::check_index_flag(flag, table.device(), where);
  if (table.device().is_cpu()) {
    // The host path has no reason to defer, but keeps the device path's contract: a bad id gives
    // a zero row and the first one is recorded.
    auto* record = flag.data_as<std::int64_t>();
    const std::int64_t vocab = table.size(0), dim = table.size(1);
    float* rows = out.data_as<float>();
    for (std::int64_t i = 0; i < ids.size(0); ++i) {
      const std::int64_t id = ops::index_at(ids, i);
      if (id >= 0 && id < vocab) {
        std::copy_n(table.data_as<const float>() + id * dim, dim, rows + i * dim);
        continue;
      }
      std::fill_n(rows + i * dim, dim, 0.0f);
      if (record[0] < 0) {
        record[0] = i;
        record[1] = id;
        record[2] = vocab;
      }
    }
    return;
  }
#if IGNIS_WITH_CUDA
  cuda::embedding_forward(table, ids, out, flag.data_as<long long>(), stream);
#endif
  (void)stream;
}

void embedding_clear_flag(const Tensor& flag, Stream stream) {
  ops::check_index_flag(flag, flag.device(), "embedding_clear_flag");
  ops::clear_index_flag(flag, stream);
}

void embedding_check_flag(const Tensor& flag, Stream stream) {
  ops::check_index_flag(flag, flag.device(), "embedding_check_flag");
  ops::throw_if_flagged(flag, "embedding_forward", "ids", stream);
}

void embedding_backward(const Tensor& dout, const Tensor& ids, const Tensor& dtable, Stream stream) {
  constexpr const char* where = "embedding_backward";
  check_args(dtable, ids, dout, where, "dtable", "dout");
  if (dtable.device().is_cpu()) {
    ops::check_indices(ids, dtable.size(0), std::nullopt, where, "ids");
    if (ids.dtype() == DType::i32)
      cpu::embedding_backward_f32(dout.data_as<const float>(), ids.data_as<const std::int32_t>(),
                                  dtable.data_as<float>(), ids.size(0), dtable.size(0), dtable.size(1));
    else
      cpu::embedding_backward_f32(dout.data_as<const float>(), ids.data_as<const std::int64_t>(),
                                  dtable.data_as<float>(), ids.size(0), dtable.size(0), dtable.size(1));
    return;
  }
#if IGNIS_WITH_CUDA
  if (cuda::embedding_backward(dout, ids, dtable, stream))
    ops::check_indices(ids, dtable.size(0), std::nullopt, where, "ids");
#endif
  (void)stream;
}

}  // namespace ignis
