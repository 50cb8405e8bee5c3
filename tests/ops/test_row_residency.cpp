// The row-cached kernels' shared-memory pad (src/cuda/common/row_residency.h): host arithmetic
// checked against a count of the blocks an SM then holds, for the H100/H200's shared memory.
#include <gtest/gtest.h>

#include "cuda/common/row_residency.h"
#include "sm_blocks.h"

namespace ignis::cuda {
namespace {

using test::blocks_an_sm;
using test::kMaxBlocks;
using test::kReserved;
using test::kSmBytes;

long long padded(long long slice, long long static_bytes) {
  return resident_row_smem(slice, kSmBytes, kReserved, static_bytes, kMaxBlocks);
}

TEST(RowResidency, SoftmaxRowsMeasuredOnTheH200GetTheirCounts) {
  // bf16 softmax rows, one block a row with 384 bytes of static shared memory.
  EXPECT_EQ(blocks_an_sm(16384, 384), 13);  // 8192 columns
  EXPECT_EQ(blocks_an_sm(padded(16384, 384), 384), 8);
  EXPECT_EQ(blocks_an_sm(32768, 384), 6);  // 16384 columns
  EXPECT_EQ(blocks_an_sm(padded(32768, 384), 384), 4);
  EXPECT_EQ(padded(8192, 384), 8192);    // 4096 columns: the same at 8, 16 and 24 blocks
  EXPECT_EQ(padded(64000, 384), 64000);  // 32000 columns: 3 blocks read more than 2
}

TEST(RowResidency, PadsOnlyItsSlicesPastTheBudgetAndThenHoldsTheWantedCount) {
  for (long long slice = 0; slice <= kSmBytes - 4096; slice += slice < 8192 ? 16 : 400) {
    for (long long static_bytes : {0LL, 200LL, 384LL, 1000LL}) {
      SCOPED_TRACE(testing::Message() << "slice " << slice << " static " << static_bytes);
      const long long smem = padded(slice, static_bytes);
      if (!takes_row_pad(slice)) {
        EXPECT_EQ(smem, slice) << "padded a slice outside the measured range";
        continue;
      }
      const long long wanted = kResidentRowBytes / slice;
      const long long natural = blocks_an_sm(slice, static_bytes);
      if (natural <= wanted) {
        EXPECT_EQ(smem, slice) << "padded a slice whose SM holds no more than the budget";
        continue;
      }
      EXPECT_GT(smem, slice);
      EXPECT_EQ(smem % kSmemGranule, 0);
      EXPECT_EQ(blocks_an_sm(smem, static_bytes), wanted);
      EXPECT_EQ(blocks_an_sm(smem, static_bytes, true), wanted) << "rounded apart";
    }
  }
}

}  // namespace
}  // namespace ignis::cuda
