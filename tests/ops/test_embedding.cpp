// Every embedding implementation (CPU f32; CUDA f32/f16/bf16) against the fp64 reference: odd
// shapes, large vocabularies, i32 and i64 ids, repeated ids in the backward, unaligned rows,
// poisoned outputs, the deferred id check, and bad arguments.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "harness/op_harness.h"
#include "ignis/ops.h"
#include "model/error_text.h"
#include "ref/embedding.h"

namespace ignis {
namespace {

using test::Impl;

class EmbeddingOp : public testing::TestWithParam<Impl> {};

std::vector<std::int64_t> random_ids(std::mt19937_64& rng, std::int64_t n, std::int64_t lo, std::int64_t hi) {
  std::uniform_int_distribution<std::int64_t> dist(lo, hi - 1);
  std::vector<std::int64_t> ids(n);
  for (auto& id : ids) id = dist(rng);
  return ids;
}

Tensor make_ids(const std::vector<std::int64_t>& ids, DType dtype, Device device) {
  return test::make_tensor(std::vector<double>(ids.begin(), ids.end()), {static_cast<std::int64_t>(ids.size())},
                           dtype, device);
}

// The gather moves bits: it must reproduce the (quantized) table exactly.
testing::AssertionResult bitwise_equal(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return testing::AssertionFailure() << got.size() << " vs " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]))
      return testing::AssertionFailure() << "element " << i << ": got " << got[i] << ", want " << want[i];
  return testing::AssertionSuccess();
}

void check_forward(const Impl& impl, std::int64_t n, std::int64_t vocab, std::int64_t dim, DType id_dtype,
                   std::uint64_t salt) {
  SCOPED_TRACE(testing::Message() << impl << " n " << n << " vocab " << vocab << " dim " << dim << " ids "
                                  << id_dtype);
  auto rng = test::case_rng(salt);
  const auto table = test::quantize(test::random_normal(rng, vocab * dim), impl.dtype);
  const auto ids = random_ids(rng, n, 0, vocab);
  Tensor tt = test::make_tensor(table, {vocab, dim}, impl.dtype, impl.device);
  Tensor out = test::make_poisoned({n, dim}, impl.dtype, impl.device);
  embedding_forward(tt, make_ids(ids, id_dtype, impl.device), out);
  EXPECT_TRUE(bitwise_equal(test::read_tensor(out), ref::embedding_forward(table, ids, vocab, dim)));
}

TEST_P(EmbeddingOp, ForwardOddShapes) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, embedding_supported(impl.device, impl.dtype));
  std::uint64_t salt = 0;
  for (std::int64_t n : {1, 3, 17, 113})
    for (std::int64_t dim : test::kOddSizes) {
      ++salt;
      check_forward(impl, n, 113, dim, salt % 2 ? DType::i32 : DType::i64, salt);
    }
  for (std::int64_t vocab : test::kOddSizes) check_forward(impl, 17, vocab, 17, DType::i64, ++salt);
  for (std::int64_t dim : {8, 64, 576, 4096}) check_forward(impl, 5, 1000, dim, DType::i32, ++salt);
  check_forward(impl, 3, 50257, 17, DType::i64, ++salt);
  check_forward(impl, 3, 32000, 64, DType::i32, ++salt);
}

// Tables and outputs that start off 16-byte boundaries take the narrower copy words.
TEST_P(EmbeddingOp, ForwardUnalignedRows) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, embedding_supported(impl.device, impl.dtype));
  const std::int64_t vocab = 9, dim = 16, n = 7;
  auto rng = test::case_rng(500);
  const auto table = test::quantize(test::random_normal(rng, (vocab + 1) * dim), impl.dtype);
  const auto ids = random_ids(rng, n, 0, vocab);
  Tensor storage = test::make_tensor(table, {vocab * dim + dim}, impl.dtype, impl.device);
  Tensor out_storage = test::make_poisoned({n * dim + 1}, impl.dtype, impl.device);
  const std::size_t elem = dtype_size(impl.dtype);
  for (std::int64_t shift : {1, 2, 3}) {
    SCOPED_TRACE(testing::Message() << impl << " shift " << shift);
    Tensor tt = Tensor::view(static_cast<char*>(storage.data()) + shift * elem, impl.dtype, impl.device, {vocab, dim});
    Tensor out = Tensor::view(static_cast<char*>(out_storage.data()) + (shift % 2) * elem, impl.dtype, impl.device,
                              {n, dim});
    embedding_forward(tt, make_ids(ids, DType::i64, impl.device), out);
    const std::vector<double> shifted(table.begin() + shift, table.begin() + shift + vocab * dim);
    auto got = test::read_tensor(out_storage);
    got.erase(got.begin(), got.begin() + shift % 2);
    got.resize(n * dim);
    EXPECT_TRUE(bitwise_equal(got, ref::embedding_forward(shifted, ids, vocab, dim)));
  }
}

void check_backward(const Impl& impl, std::int64_t n, std::int64_t vocab, std::int64_t dim, std::int64_t distinct,
                    DType id_dtype, std::uint64_t salt) {
  SCOPED_TRACE(testing::Message() << impl << " n " << n << " vocab " << vocab << " dim " << dim << " distinct "
                                  << distinct << " ids " << id_dtype);
  auto rng = test::case_rng(salt);
  const auto dout = test::quantize(test::random_normal(rng, n * dim), impl.dtype);
  // Ids from the top `distinct` rows: repeats whenever n > distinct, and untouched rows below.
  const auto ids = random_ids(rng, n, vocab - std::min(vocab, distinct), vocab);
  Tensor dtable = test::make_poisoned({vocab, dim}, impl.dtype, impl.device);
  embedding_backward(test::make_tensor(dout, {n, dim}, impl.dtype, impl.device), make_ids(ids, id_dtype, impl.device),
                     dtable);
  const auto ref = ref::embedding_backward(dout, ids, vocab, dim);
  EXPECT_TRUE(test::close_to_reference(test::read_tensor(dtable), ref, impl.dtype, test::quantize(ref, impl.dtype)));
}

TEST_P(EmbeddingOp, BackwardRepeatedIds) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, embedding_supported(impl.device, impl.dtype));
  std::uint64_t salt = 1000;
  for (std::int64_t n : {1, 3, 17, 113})
    for (std::int64_t dim : test::kOddSizes) {
      ++salt;
      check_backward(impl, n, 113, dim, 4, salt % 2 ? DType::i32 : DType::i64, salt);
    }
  for (std::int64_t vocab : test::kOddSizes) check_backward(impl, 17, vocab, 3, 1000000, DType::i64, ++salt);
  check_backward(impl, 300, 1000, 64, 1, DType::i32, ++salt);  // one id 300 times
  check_backward(impl, 113, 50257, 8, 50257, DType::i64, ++salt);
  check_backward(impl, 2000, 32000, 17, 40, DType::i32, ++salt);
}

TEST_P(EmbeddingOp, BackwardIsDeterministic) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, embedding_supported(impl.device, impl.dtype));
  const std::int64_t n = 4000, vocab = 50, dim = 40;
  auto rng = test::case_rng(1500);
  Tensor dout = test::make_tensor(test::random_normal(rng, n * dim), {n, dim}, impl.dtype, impl.device);
  Tensor ids = make_ids(random_ids(rng, n, 0, vocab), DType::i64, impl.device);
  Tensor a = test::make_poisoned({vocab, dim}, impl.dtype, impl.device);
  Tensor b = test::make_poisoned({vocab, dim}, impl.dtype, impl.device);
  embedding_backward(dout, ids, a);
  embedding_backward(dout, ids, b);
  EXPECT_TRUE(bitwise_equal(test::read_tensor(a), test::read_tensor(b)));
}

TEST_P(EmbeddingOp, OutOfRangeIdsThrowWithIdPositionAndVocab) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, embedding_supported(impl.device, impl.dtype));
  const std::int64_t vocab = 5, dim = 8;
  Tensor table = test::make_tensor(std::vector<double>(vocab * dim, 1.0), {vocab, dim}, impl.dtype, impl.device);
  for (DType id_dtype : {DType::i32, DType::i64})
    for (std::int64_t bad : {5, -1, 1000000}) {
      SCOPED_TRACE(testing::Message() << impl << " ids " << id_dtype << " bad " << bad);
      Tensor ids = make_ids({0, 4, bad, 1, bad}, id_dtype, impl.device);
      Tensor out = test::make_poisoned({5, dim}, impl.dtype, impl.device);
      const std::string expected = "ids[2]: expected an index in [0, 5), got " + std::to_string(bad);
      try {
        embedding_forward(table, ids, out);
        ADD_FAILURE() << "forward accepted id " << bad;
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), "embedding_forward: " + expected);
      }
      try {
        embedding_backward(out, ids, test::make_poisoned({vocab, dim}, impl.dtype, impl.device));
        ADD_FAILURE() << "backward accepted id " << bad;
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), "embedding_backward: " + expected);
      }
    }
  // The device must still answer normally afterwards.
  Tensor out = test::make_poisoned({1, dim}, impl.dtype, impl.device);
  embedding_forward(table, make_ids({3}, DType::i32, impl.device), out);
  EXPECT_TRUE(bitwise_equal(test::read_tensor(out), std::vector<double>(dim, 1.0)));
}

// Rows longer than one warp's chunk (2 KB of 16-byte words, 1 KB of 8-byte words) are copied by
// several warps: a bad id must zero every chunk of its row and be recorded once, and the good rows
// around it must be whole (dim 2100: f32 rows of 5 chunks, 16-bit rows of 5 chunks of 8-byte words).
TEST_P(EmbeddingOp, DeferredCheckZeroesEveryChunkOfLongRows) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, embedding_supported(impl.device, impl.dtype));
  const std::int64_t vocab = 6, dim = 2100;
  auto rng = test::case_rng(1700);
  const auto table = test::quantize(test::random_normal(rng, vocab * dim), impl.dtype);
  Tensor tt = test::make_tensor(table, {vocab, dim}, impl.dtype, impl.device);
  Tensor flag = test::make_poisoned({3}, DType::i64, impl.device);
  embedding_clear_flag(flag);
  Tensor out = test::make_poisoned({4, dim}, impl.dtype, impl.device);
  embedding_forward_deferred(tt, make_ids({5, 7, 0, 3}, DType::i64, impl.device), out, flag);
  auto want = ref::embedding_forward(table, std::vector<std::int64_t>{5, 0, 0, 3}, vocab, dim);
  std::fill(want.begin() + dim, want.begin() + 2 * dim, 0.0);
  EXPECT_TRUE(bitwise_equal(test::read_tensor(out), want));
  try {
    embedding_check_flag(flag);
    ADD_FAILURE() << "the recorded bad id was not reported";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "embedding_forward: ids[1]: expected an index in [0, 6), got 7");
  }
}

TEST_P(EmbeddingOp, DeferredCheckRecordsBadIdsAndZeroesTheirRows) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, embedding_supported(impl.device, impl.dtype));
  const std::int64_t vocab = 6, dim = 5;
  auto rng = test::case_rng(1600);
  const auto table = test::quantize(test::random_normal(rng, vocab * dim), impl.dtype);
  Tensor tt = test::make_tensor(table, {vocab, dim}, impl.dtype, impl.device);
  Tensor flag = test::make_poisoned({3}, DType::i64, impl.device);
  embedding_clear_flag(flag);

  const std::vector<std::int64_t> good = {5, 0, 5};
  Tensor out = test::make_poisoned({3, dim}, impl.dtype, impl.device);
  embedding_forward_deferred(tt, make_ids(good, DType::i32, impl.device), out, flag);
  EXPECT_NO_THROW(embedding_check_flag(flag));
  EXPECT_TRUE(bitwise_equal(test::read_tensor(out), ref::embedding_forward(table, good, vocab, dim)));

  // A bad id in a later call: its row is zero, the others are gathered, and the check names it.
  embedding_forward_deferred(tt, make_ids({1, 6, 2}, DType::i64, impl.device), out, flag);
  embedding_forward_deferred(tt, make_ids(good, DType::i64, impl.device), out, flag);
  try {
    embedding_check_flag(flag);
    ADD_FAILURE() << "the recorded bad id was not reported";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "embedding_forward: ids[1]: expected an index in [0, 6), got 6");
  }
  Tensor out2 = test::make_poisoned({3, dim}, impl.dtype, impl.device);
  embedding_forward_deferred(tt, make_ids({1, -3, 2}, DType::i64, impl.device), out2, flag);
  auto want = ref::embedding_forward(table, std::vector<std::int64_t>{1, 0, 2}, vocab, dim);
  std::fill(want.begin() + dim, want.begin() + 2 * dim, 0.0);
  EXPECT_TRUE(bitwise_equal(test::read_tensor(out2), want));
  embedding_clear_flag(flag);
  EXPECT_NO_THROW(embedding_check_flag(flag));
}

TEST_P(EmbeddingOp, RejectsBadArguments) {
  const Impl impl = GetParam();
  IGNIS_SKIP_UNLESS(impl, embedding_supported(impl.device, impl.dtype));
  const Device dev = impl.device;
  const Device other_device = dev.is_cpu() ? Device::cuda(0) : Device::cpu();
  Tensor table = test::make_poisoned({10, 8}, impl.dtype, dev);
  Tensor ids = make_ids({1, 2, 3}, DType::i32, dev);
  Tensor out = test::make_poisoned({3, 8}, impl.dtype, dev);
  const DType other_dtype = impl.dtype == DType::f32 ? DType::f16 : DType::f32;

  EXPECT_ERROR_CONTAINS(embedding_forward(table, ids, test::make_poisoned({3, 9}, impl.dtype, dev)),
                        "embedding_forward: out.shape");
  EXPECT_ERROR_CONTAINS(embedding_forward(table, ids, test::make_poisoned({4, 8}, impl.dtype, dev)),
                        "embedding_forward: out.shape");
  EXPECT_ERROR_CONTAINS(embedding_forward(table, ids, test::make_poisoned({3, 8}, other_dtype, dev)),
                        "embedding_forward: out.dtype");
  EXPECT_ERROR_CONTAINS(embedding_forward(table, test::make_poisoned({3}, DType::f32, dev), out),
                        "embedding_forward: ids.dtype");
  EXPECT_ERROR_CONTAINS(embedding_forward(table, test::make_poisoned({3}, DType::u8, dev), out),
                        "embedding_forward: ids.dtype");
  EXPECT_ERROR_CONTAINS(embedding_forward(table, make_ids({1, 2, 3}, DType::i32, dev).reshape({3, 1}), out),
                        "embedding_forward: ids.dim");
  EXPECT_ERROR_CONTAINS(embedding_forward(table.reshape({80}), ids, out), "embedding_forward: table.dim");
  // Views on the other device are rejected before anything touches their (fake) memory.
  EXPECT_ERROR_CONTAINS(embedding_forward(table, Tensor::view(ids.data(), DType::i32, other_device, {3}), out),
                        "embedding_forward: ids.device");
  EXPECT_ERROR_CONTAINS(embedding_forward(table, ids, Tensor::view(out.data(), impl.dtype, other_device, {3, 8})),
                        "embedding_forward: out.device");
  Tensor strided_table = Tensor::view(table.data(), impl.dtype, dev, {5, 8}, {16, 1});
  EXPECT_ERROR_CONTAINS(embedding_forward(strided_table, ids, out), "embedding_forward: table.strides");
  Tensor wide_ids = make_ids({1, 0, 2, 0, 3, 0}, DType::i32, dev);
  EXPECT_ERROR_CONTAINS(embedding_forward(table, Tensor::view(wide_ids.data(), DType::i32, dev, {3}, {2}), out),
                        "embedding_forward: ids.strides");
  EXPECT_ERROR_CONTAINS(embedding_backward(test::make_poisoned({3, 7}, impl.dtype, dev), ids, table),
                        "embedding_backward: dout.shape");
  EXPECT_ERROR_CONTAINS(embedding_backward(out, test::make_poisoned({3}, DType::f64, dev), table),
                        "embedding_backward: ids.dtype");
  // On the CPU only f32 tables exist; on CUDA the other dtype is a valid table that dout does not match.
  EXPECT_ERROR_CONTAINS(embedding_backward(out, ids, test::make_poisoned({10, 8}, other_dtype, dev)),
                        dev.is_cpu() ? "embedding_backward: dtable.dtype on cpu" : "embedding_backward: dout.dtype");
  Tensor flag = test::make_poisoned({3}, DType::i64, dev);
  EXPECT_ERROR_CONTAINS(embedding_forward_deferred(table, ids, out, test::make_poisoned({3}, DType::i32, dev)),
                        "embedding_forward_deferred: flag.dtype");
  EXPECT_ERROR_CONTAINS(embedding_forward_deferred(table, ids, out, test::make_poisoned({2}, DType::i64, dev)),
                        "embedding_forward_deferred: flag.shape");
  EXPECT_ERROR_CONTAINS(
      embedding_forward_deferred(table, ids, out, Tensor::view(flag.data(), DType::i64, other_device, {3})),
      "embedding_forward_deferred: flag.device");
  try {
    embedding_forward(table, test::make_poisoned({3}, DType::f32, dev), out);
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "embedding_forward: ids.dtype: expected i32 or i64, got f32");
  }
  try {
    embedding_forward(table, ids, test::make_poisoned({3, 9}, impl.dtype, dev));
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "embedding_forward: out.shape: expected [3, 8], got [3, 9]");
  }
}

TEST(EmbeddingOp, RejectsUnsupportedDtype) {
  EXPECT_FALSE(embedding_supported(Device::cpu(), DType::f16));
  Tensor table = test::make_poisoned({4, 2}, DType::f64, Device::cpu());
  Tensor out = test::make_poisoned({1, 2}, DType::f64, Device::cpu());
  EXPECT_ERROR_CONTAINS(embedding_forward(table, make_ids({0}, DType::i64, Device::cpu()), out),
                        "embedding_forward: table.dtype on cpu");
}

INSTANTIATE_TEST_SUITE_P(Impls, EmbeddingOp, testing::ValuesIn(test::all_impls()), test::impl_param_name);

}  // namespace
}  // namespace ignis
