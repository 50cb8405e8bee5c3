// The shared-memory cap on blocks an SM (src/cuda/common/sm_share.h): host arithmetic checked
// against a count of the blocks an SM then holds, for the H100/H200's shared memory.
#include <gtest/gtest.h>

#include "cuda/common/sm_share.h"
#include "sm_blocks.h"

namespace ignis::cuda {
namespace {

using test::blocks_an_sm;
using test::kReserved;
using test::kSmBytes;

long long capped(long long blocks, long long static_bytes) {
  return smem_for_blocks_an_sm(blocks, kSmBytes, kReserved, static_bytes);
}

TEST(SmShare, EveryCountUpToTheExactLimitFitsAndLeavesNoRoomForOneMore) {
  for (long long blocks = 1; blocks <= 29; ++blocks) {
    for (long long static_bytes : {0LL, 1LL, 200LL, 384LL, 1000LL, 4096LL}) {
      SCOPED_TRACE(testing::Message() << blocks << " blocks, static " << static_bytes);
      const long long smem = capped(blocks, static_bytes);
      ASSERT_GT(smem, 0);
      EXPECT_EQ(smem % kSmemGranule, 0);
      EXPECT_EQ(blocks_an_sm(smem, static_bytes), blocks);
      EXPECT_EQ(blocks_an_sm(smem, static_bytes, true), blocks) << "rounded apart";
    }
  }
}

TEST(SmShare, CountsThatCannotFitGiveNoPositiveSize) {
  EXPECT_LE(capped(kSmBytes / kReserved, 0), 0);  // the reserved bytes alone fill the SM
  EXPECT_LE(capped(2, kSmBytes / 2), 0);          // two blocks' static memory alone fills it
}

}  // namespace
}  // namespace ignis::cuda
