// Every position embedding implementation (CPU f32; CUDA f32/f16/bf16) against the fp64
// reference: odd widths and lengths, host offsets, per-sequence device offsets, positions past
// the table through device offsets (CUDA leaves those tokens unchanged), and bad arguments.
#include <gtest/gtest.h>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/position_embedding.h"

namespace ignis {
namespace {

using test::Impl;

class PositionEmbeddingOp : public testing::TestWithParam<Impl> {};

struct Case {
  std::int64_t batch, seqlen, dim, positions, offset;
  std::vector<std::int32_t> batch_offsets;  // empty: none
};

void check_case(const Impl& impl, const Case& c, std::uint64_t salt) {
  SCOPED_TRACE(testing::Message() << impl << " [" << c.batch << ", " << c.seqlen << ", " << c.dim << "] positions "
                                  << c.positions << " offset " << c.offset << " batch_offsets "
                                  << c.batch_offsets.size());
  auto rng = test::case_rng(salt);
  const auto x = test::quantize(test::random_normal(rng, c.batch * c.seqlen * c.dim), impl.dtype);
  const auto table = test::quantize(test::random_normal(rng, c.positions * c.dim), impl.dtype);
  std::vector<std::int64_t> starts(static_cast<std::size_t>(c.batch), c.offset);
  std::optional<Tensor> offsets;
  if (!c.batch_offsets.empty()) {
    offsets = test::make_tensor(std::vector<double>(c.batch_offsets.begin(), c.batch_offsets.end()), {c.batch},
                                DType::i32, impl.device);
    for (std::size_t b = 0; b < starts.size(); ++b) starts[b] += c.batch_offsets[b];
  }
  Tensor tx = test::make_tensor(x, {c.batch, c.seqlen, c.dim}, impl.dtype, impl.device);
  Tensor tt = test::make_tensor(table, {c.positions, c.dim}, impl.dtype, impl.device);
  position_embedding_add(tx, tt, c.offset, offsets);
  const auto ref = ref::position_embedding_add(x, table, starts, c.seqlen, c.dim);
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(tx), ref, impl.dtype, test::quantize(ref, impl.dtype)));
}

TEST_P(PositionEmbeddingOp, OddShapesAndOffsets) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, position_embedding_supported(impl.device, impl.dtype));
  std::uint64_t salt = 100;
  for (std::int64_t dim : test::kOddSizes)
    for (std::int64_t seqlen : {1, 3, 17}) check_case(impl, {1, seqlen, dim, 40, 40 - seqlen, {}}, ++salt);
  check_case(impl, {1, 113, 768, 1024, 5, {}}, ++salt);  // GPT-2's width
  check_case(impl, {2, 3, 17, 24, 0, {}}, ++salt);
}

TEST_P(PositionEmbeddingOp, DeviceOffsetsPerSequence) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, position_embedding_supported(impl.device, impl.dtype));
  check_case(impl, {3, 4, 33, 30, 2, {0, 7, 24}}, 201);
  check_case(impl, {1, 1, 1023, 9, 0, {8}}, 202);  // a decode step at the table's last row
}

// On CUDA the position cannot be checked without a sync: tokens past the table stay as they were.
TEST_P(PositionEmbeddingOp, CudaLeavesTokensPastTheTableUnchanged) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, impl.device.is_cuda() && position_embedding_supported(impl.device, impl.dtype));
  check_case(impl, {2, 3, 17, 6, 0, {4, -1}}, 301);  // positions 4, 5, 6 and -1, 0, 1
}

TEST_P(PositionEmbeddingOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, position_embedding_supported(impl.device, impl.dtype));
  const Device dev = impl.device;
  const DType other = impl.dtype == DType::f32 ? DType::f64 : DType::f32;
  Tensor x = test::make_tensor(std::vector<double>(2 * 3 * 8, 0.5), {2, 3, 8}, impl.dtype, dev);
  Tensor table = test::make_tensor(std::vector<double>(10 * 8, 1.0), {10, 8}, impl.dtype, dev);
  EXPECT_ERROR_CONTAINS(position_embedding_add(x.reshape({6, 8}), table, 0), "position_embedding_add: x");
  EXPECT_ERROR_CONTAINS(position_embedding_add(x, table.reshape({20, 4}), 0),
                        "position_embedding_add: table.shape[1]: expected 8, got 4");
  EXPECT_ERROR_CONTAINS(position_embedding_add(x, test::make_poisoned({10, 8}, other, dev), 0),
                        "position_embedding_add: table.dtype");
  EXPECT_ERROR_CONTAINS(position_embedding_add(x, table, -1), "position_embedding_add: position_offset");
  EXPECT_ERROR_CONTAINS(position_embedding_add(x, table, 8),
                        "position_embedding_add: position_offset + seqlen: expected <= table.shape[0] 10, got 11");
  Tensor strided = Tensor::view(x.data(), impl.dtype, dev, {2, 3, 4}, {24, 8, 1});
  EXPECT_ERROR_CONTAINS(position_embedding_add(strided, table, 0), "position_embedding_add: x.strides");
  EXPECT_ERROR_CONTAINS(position_embedding_add(x, table, 0, test::make_tensor({0, 0, 0}, {3}, DType::i32, dev)),
                        "position_embedding_add: batch_offsets.shape");
  EXPECT_ERROR_CONTAINS(position_embedding_add(x, table, 0, test::make_tensor({0, 0}, {2}, DType::i64, dev)),
                        "position_embedding_add: batch_offsets.dtype");
  if (dev.is_cuda()) {
    EXPECT_ERROR_CONTAINS(
        position_embedding_add(x, test::make_tensor(std::vector<double>(80, 1.0), {10, 8}, impl.dtype, Device::cpu()),
                               0),
        "position_embedding_add: table.device");
    EXPECT_ERROR_CONTAINS(
        position_embedding_add(x, table, 0, test::make_tensor({0, 0}, {2}, DType::i32, Device::cpu())),
        "position_embedding_add: batch_offsets.device");
  } else {
    // The host sees device offsets too: a position past the table throws before anything is written.
    const auto before = test::read_tensor(x);
    EXPECT_ERROR_CONTAINS(position_embedding_add(x, table, 1, test::make_tensor({0, 7}, {2}, DType::i32, dev)),
                          "position_embedding_add: positions of sequence 1: expected inside [0, 10), got [8, 11)");
    EXPECT_EQ(test::read_tensor(x), before);
  }
}

TEST(PositionEmbeddingOp, RejectsUnsupportedDtype) {
  EXPECT_FALSE(position_embedding_supported(Device::cpu(), DType::f64));
  Tensor x = test::make_poisoned({1, 1, 4}, DType::f64, Device::cpu());
  EXPECT_ERROR_CONTAINS(position_embedding_add(x, test::make_poisoned({2, 4}, DType::f64, Device::cpu()), 0),
                        "position_embedding_add: x.dtype on cpu");
}

INSTANTIATE_TEST_SUITE_P(Impls, PositionEmbeddingOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
