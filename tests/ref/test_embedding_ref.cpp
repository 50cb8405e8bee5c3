// Reference embedding: hand values, repeated ids, out-of-range ids, backward against finite differences.
#include <gtest/gtest.h>

#include "harness/finite_diff.h"
#include "harness/op_harness.h"
#include "ignis/error.h"
#include "model/error_text.h"
#include "ref/embedding.h"

namespace ignis {
namespace {

TEST(RefEmbedding, ForwardGathersRows) {
  // table rows: [0, 1], [10, 11], [20, 21]; ids [2, 0, 2] -> rows 2, 0, 2.
  const std::vector<double> table = {0, 1, 10, 11, 20, 21};
  const std::vector<std::int64_t> ids = {2, 0, 2};
  EXPECT_EQ(ref::embedding_forward(table, ids, 3, 2), (std::vector<double>{20, 21, 0, 1, 20, 21}));
}

TEST(RefEmbedding, BackwardAccumulatesRepeatedIds) {
  // ids [1, 1, 3]: row 1 gets dout[0] + dout[1], row 3 gets dout[2], rows 0 and 2 stay 0.
  const std::vector<double> dout = {1, 2, 10, 20, 5, 7};
  const std::vector<std::int64_t> ids = {1, 1, 3};
  EXPECT_EQ(ref::embedding_backward(dout, ids, 4, 2), (std::vector<double>{0, 0, 11, 22, 0, 0, 5, 7}));
}

TEST(RefEmbedding, OutOfRangeIdsNameIdPositionAndVocab) {
  const std::vector<double> table(6, 1.0);
  for (std::int64_t bad : {-1, 3, 1000}) {
    const std::vector<std::int64_t> ids = {0, 2, bad};
    try {
      ref::embedding_forward(table, ids, 3, 2);
      ADD_FAILURE() << "id " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "embedding_forward: ids[2]: expected an index in [0, 3), got " + std::to_string(bad));
    }
    EXPECT_ERROR_CONTAINS(ref::embedding_backward(table, ids, 3, 2), "embedding_backward: ids[2]");
  }
}

TEST(RefEmbedding, BackwardMatchesFiniteDifferences) {
  auto rng = test::case_rng(7);
  const std::int64_t vocab = 5, dim = 3;
  const std::vector<std::int64_t> ids = {4, 1, 4, 0, 4};
  const auto table = test::random_normal(rng, vocab * dim);
  const auto g = test::random_normal(rng, ids.size() * dim);
  const auto analytic = ref::embedding_backward(g, ids, vocab, dim);
  const auto numeric =
      test::numeric_vjp([&](const auto& at) { return ref::embedding_forward(at, ids, vocab, dim); }, table, g);
  EXPECT_LT(test::max_rel_diff(analytic, numeric), 1e-8);
}

}  // namespace
}  // namespace ignis
